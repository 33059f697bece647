"""JSON without Infinity: epsilon = inf (no noise) is written as the string "inf"."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def finite_json(obj: Any) -> Any:
    """A copy of obj with NumPy scalars/arrays as Python values and non-finite floats as strings."""
    if isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if math.isfinite(v):
            return v
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def epsilon_value(v: Any) -> float:
    """Read back an epsilon written by finite_json."""
    return math.inf if v == "inf" else float(v)
