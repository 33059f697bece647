"""Reading rows of logits/probabilities from .npy, .npz, .csv or stdin."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np


def read_rows(source: str) -> np.ndarray:
    """A 2-D float array: one query per row. ``-`` reads CSV/whitespace text from stdin."""
    if source == "-":
        text = sys.stdin.read()
        return _parse_text(text, "stdin")
    path = Path(source)
    if not path.exists():
        raise ValueError(f"input file {source} does not exist")
    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
    elif path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            key = next((k for k in ("probs", "logits", "x") if k in z.files), None)
            if key is None:
                raise ValueError(f"{source}: expected an array named probs, logits or x")
            arr = z[key]
    else:
        return _parse_text(path.read_text(), source)
    return _check(_real(arr, source), source)


def _real(arr: np.ndarray, name: str) -> np.ndarray:
    """The array as float64; complex or non-numeric data is an error, not a silent conversion."""
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: complex values (the device takes real class scores)")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name}: {arr.dtype} data (the device takes real class scores)")
    return np.asarray(arr, dtype=np.float64)


def _parse_text(text: str, name: str) -> np.ndarray:
    rows = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not rows:
        raise ValueError(f"{name}: no rows")
    try:
        arr = np.loadtxt(io.StringIO("\n".join(r.replace(",", " ") for r in rows)), ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{name}: not numeric CSV ({exc})") from None
    return _check(arr, name)


def check_finite(rows: np.ndarray, name: str) -> None:
    """Refuse rows holding NaN or ±inf before anything is sent: the device refuses them
    (ERR_BAD_VALUE), and a clamped inf would hide a broken input rather than answer it."""
    bad = ~np.isfinite(rows)
    if bad.any():
        where = np.flatnonzero(bad.any(axis=1))
        rows_text = ", ".join(str(i) for i in where[:5]) + (f" and {len(where) - 5} more" if len(where) > 5 else "")
        kinds = " and ".join(k for k, m in (("NaN", np.isnan(rows)), ("inf", np.isinf(rows))) if m.any())
        raise ValueError(f"{name}: {kinds} in row{'s' if len(where) > 1 else ''} {rows_text} (counting from 0); "
                         "the device refuses non-finite values, so nothing was sent")


def _check(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.size == 0:
        raise ValueError(f"{name}: no rows (an empty array of shape {arr.shape})")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"{name}: expected a 2-D array (rows of class scores), got shape {arr.shape}")
    return arr
