"""Seeds, progress bars and the worker pool shared by the long analysis steps.

Every embarrassingly parallel step (shadow models, audit trainings, trade-off cells) goes through
``pmap``: local worker processes by default, or the workers of a Dask cluster inside
``backend("tcp://scheduler:8786")`` (joblib's dask backend, the ``[dist]`` extra). Every item
carries its own seed, so the results are the same on either backend and for any number of workers."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
from joblib import Parallel, delayed, parallel_config
from tqdm import tqdm

T = TypeVar("T")


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def child_seed(seed: int, *path: int | str) -> np.random.SeedSequence:
    """A reproducible, independent seed for one piece of work, named by a path of ints/strings."""
    words = [seed] + [p if isinstance(p, int) else _word(p) for p in path]
    return np.random.SeedSequence(words)


def rng_for(seed: int, *path: int | str) -> np.random.Generator:
    return np.random.default_rng(child_seed(seed, *path))


def int_seed(seed: int, *path: int | str) -> int:
    """A 31-bit integer seed (scikit-learn's random_state) for one piece of work."""
    return int(child_seed(seed, *path).generate_state(1)[0] & 0x7FFFFFFF)


def _word(s: str) -> int:
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


_dask: list[str] = []   # the scheduler addresses of the active ``backend`` blocks, innermost last


@contextlib.contextmanager
def backend(address: str | None, timeout: float = 10.0) -> Iterator[None]:
    """Inside the block, ``pmap`` runs on the Dask cluster whose scheduler is at ``address``
    (tcp://host:port); None keeps the local processes. ValueError if it cannot be reached within
    ``timeout`` seconds."""
    if address is None:
        yield
        return
    try:
        from dask.distributed import Client
    except ModuleNotFoundError:
        raise ValueError("--dask needs the [dist] extra: pip install 'edgedp[dist]'") from None
    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ValueError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        with parallel_config(backend="dask"):
            _dask.append(address)
            try:
                yield
            finally:
                _dask.pop()
    finally:
        client.close()


def pmap(fn: Callable[..., T], items: Sequence[Any], jobs: int = 1, desc: str = "",
         progress: bool = True, star: bool = False) -> list[T]:
    """[fn(item) for item in items] on ``jobs`` worker processes (or the Dask cluster of the active
    ``backend``), in order, with a progress bar on stderr. Results do not depend on the backend or
    on ``jobs`` (every item carries its own seed)."""
    bar = tqdm(total=len(items), desc=desc, disable=not progress, leave=False, unit="task")
    try:
        if not _dask and (jobs <= 1 or len(items) <= 1):
            out = []
            for it in items:
                out.append(fn(*it) if star else fn(it))
                bar.update()
            return out
        calls: Iterable = (delayed(fn)(*it) if star else delayed(fn)(it) for it in items)
        out = []
        for r in Parallel(n_jobs=-1 if _dask else jobs, return_as="generator")(calls):
            out.append(r)
            bar.update()
        return out
    finally:
        bar.close()
