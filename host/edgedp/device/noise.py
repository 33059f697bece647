"""Raw noise samples from a device (SAMPLE, test builds), in batches of up to 1024."""
from __future__ import annotations

import numpy as np
from tqdm import tqdm

from .client import Device


def draw_samples(dev: Device, epsilon: float, sensitivity: float, k: int, count: int,
                 progress: bool = True) -> np.ndarray:
    """count raw lattice noise samples in SAMPLE batches of up to 1024."""
    chunks = []
    with tqdm(total=count, desc="samples", unit="", disable=not progress, leave=False) as bar:
        left = count
        while left > 0:
            n = min(left, 1024)
            chunks.append(dev.sample(epsilon, sensitivity, k, n)[2])
            left -= n
            bar.update(n)
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
