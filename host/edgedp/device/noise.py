"""Raw noise samples from a device (SAMPLE, test builds), any number, in requests of at most 1024."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from tqdm import tqdm

from . import protocol as P
from .client import Device


def draw_samples(dev: Device, req: P.SampleRequest, progress: bool = True,
                 stop: Callable[[], bool] | None = None) -> np.ndarray:
    """``req.count`` raw lattice noise samples, drawn in SAMPLE requests of up to P.MAX_SAMPLES;
    fewer if ``stop()`` holds before a request (none is sent after it does)."""
    chunks = []
    with tqdm(total=req.count, desc="samples", unit="", disable=not progress, leave=False) as bar:
        left = req.count
        while left > 0 and not (stop and stop()):
            n = min(left, P.MAX_SAMPLES)
            chunks.append(dev.sample(dataclasses.replace(req, count=n)).noise)
            left -= n
            bar.update(n)
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
