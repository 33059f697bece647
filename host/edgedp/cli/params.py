"""Command-line parameter types: every number is checked here, at the edge, with the reason.

A bad value stops the command before anything is sent to a device, as click's usual one-line
usage error (exit code 2), never as a traceback or a device error code."""
from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..device.protocol import MAX_UNIX_TIME
from ..mech.lattice import MAX_CLASSES, MICRO, to_epsilon, to_micro
from ..mech.modes import MODE_TOPK, Mode

U32, U64 = 2**32 - 1, 2**64 - 1


class _Number(click.ParamType):
    """A finite float in an interval, with the unit's own words in the error."""

    name = "float"

    def __init__(self, what: str, low: float, high: float, zero_ok: bool = False, micro_max: int | None = None):
        self.what, self.low, self.high, self.zero_ok, self.micro_max = what, low, high, zero_ok, micro_max

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            v = value
        else:
            try:
                v = float(value)
            except ValueError:
                self.fail(f"{self.what} must be a number, not {value!r}", param, ctx)
        if not math.isfinite(v):
            self.fail(f"{self.what} must be finite, not {value}", param, ctx)
        if v == 0 and self.zero_ok:
            return v
        if not v > 0:
            self.fail(f"{self.what} must be > 0{' (or 0)' if self.zero_ok else ''}, not {value}", param, ctx)
        if self.micro_max is not None:
            micro = to_micro(v)
            if micro < 1:
                self.fail(f"{self.what} must be at least 1e-6 (the device counts micro-epsilon), not {value}",
                          param, ctx)
            if micro > self.micro_max:
                self.fail(f"{self.what} must be at most {to_epsilon(self.micro_max):.6f} (the device's "
                          f"{'32' if self.micro_max == U32 else '64'}-bit micro-epsilon), not {value}", param, ctx)
        elif not v <= self.high:
            self.fail(f"{self.what} must be at most {self.high:g}, not {value}", param, ctx)
        if v < self.low:
            self.fail(f"{self.what} must be at least {self.low:g}, not {value}", param, ctx)
        return v


def positive(what: str, high: float = math.inf) -> click.ParamType:
    """A finite float in (0, high]: NaN, inf, 0 and negatives are usage errors naming ``what``."""
    return _Number(what, 0.0, high)


EPSILON = _Number("epsilon", 0.0, math.inf, micro_max=U32)
"""Per-query epsilon: micro-epsilon in 1..2^32-1 (the CONFIG and SAMPLE fields are u32)."""
DAILY_CAP = _Number("the daily cap", 0.0, math.inf, micro_max=U64)
LIFETIME_CAP = _Number("the lifetime cap", 0.0, math.inf, zero_ok=True, micro_max=U64)
SENSITIVITY = _Number("the sensitivity", float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))
"""L1 sensitivity: a positive normal float32 (the device stores it as one)."""
UNIX_TIME = click.IntRange(0, MAX_UNIX_TIME)
"""--unix: seconds from 1970 to the end of 9999-12-31 UTC (the device does not check the range)."""
SAMPLES = click.IntRange(1, None)
CLASSES = click.IntRange(1, MAX_CLASSES)


class _ModeType(click.ParamType):
    """--mode: full | topk:K | label | bucket | round:D | simplex."""

    name = "mode"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Mode:
        if isinstance(value, Mode):
            return value
        try:
            return Mode.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


MODE = _ModeType()


def check_mode_fits(m: Mode, k: int) -> None:
    """topk:K needs at least K classes (checked on the host, before anything is sent)."""
    if m.kind == MODE_TOPK and m.arg > k:
        raise click.UsageError(f"--mode {m} asks for the {m.arg} largest of {k} classes: use K <= {k}")


class _DateType(click.ParamType):
    """A calendar date YYYY-MM-DD, as midnight UTC in Unix seconds."""

    name = "YYYY-MM-DD"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            day = dt.date.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a date YYYY-MM-DD with a valid month (01-12) and day of that month",
                      param, ctx)
        return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp())


DATE = _DateType()


def check_range(ctx: click.Context, param: click.Parameter, value: tuple[float, float] | None
                ) -> tuple[float, float] | None:
    """--range LO HI: finite float32 values with LO < HI."""
    if value is None:
        return None
    lo, hi = value
    f32 = float(np.finfo(np.float32).max)
    if not all(math.isfinite(v) and abs(v) <= f32 for v in value):
        raise click.BadParameter(f"LO and HI must be finite float32 values, not {lo} {hi}", ctx, param)
    if not lo < hi:
        raise click.BadParameter(f"LO must be below HI, not {lo} {hi}", ctx, param)
    return value


def check_writable(path: str) -> Path:
    """An output file that can be created or overwritten (checked before any query is charged)."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ValueError(f"cannot write {path}: it is a directory")
    if not parent.is_dir():
        raise ValueError(f"cannot write {path}: folder {parent} does not exist")
    if not os.access(p, os.W_OK) if p.exists() else not os.access(parent, os.W_OK):
        raise ValueError(f"cannot write {path}: permission denied")
    return p
