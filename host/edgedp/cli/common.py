"""Shared pieces of the command line: target and --json options, output, one-line errors."""
from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click
import numpy as np

from ..device.client import DEFAULT_TIMEOUT, TIMEOUT_ENV
from ..device.errors import EdgeDPError, TransportError
from ..device.targets import check_spec


def _check_target(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        return None if value is None else check_spec(value)
    except TransportError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def _set_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> None:
    """--timeout reaches the device API as EDGEDP_TIMEOUT (edgedp.device.client.default_timeout)."""
    if value is not None:
        os.environ[TIMEOUT_ENV] = repr(value)


timeout_option = click.option(
    "--timeout", type=click.FloatRange(min=0.1, max=3600), default=None, envvar=TIMEOUT_ENV, expose_value=False,
    callback=_set_timeout, metavar="SECONDS",
    help=f"Seconds to wait for each device answer and for the device to boot (default {DEFAULT_TIMEOUT:g}; "
         f"env {TIMEOUT_ENV}). Raise it under heavy load or on Renode.")

_target_option = click.option(
    "--target", "-t", default=None, metavar="T", envvar="EDGEDP_TARGET", callback=_check_target,
    help="qemu, qemu:stm32f4, host, host:san, renode, session, or a pyserial URL such as socket://127.0.0.1:4321. "
         "Default: the running `edgedp device` session, else a fresh qemu.")


def target_option(fn: Callable) -> Callable:
    """--target and --timeout: every command that talks to a device takes both."""
    return _target_option(timeout_option(fn))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
progress_option = click.option("--no-progress", is_flag=True,
                               help="No progress bars (they go to stderr, also under --json).")


def _use_dask(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Run the command's parallel steps on the Dask cluster at value, for as long as it runs."""
    if value is None:
        return
    from ..analysis.parallel import backend
    try:
        ctx.with_resource(backend(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


dask_option = click.option(
    "--dask", default=None, metavar="tcp://HOST:PORT", expose_value=False, callback=_use_dask,
    help="Run the parallel steps (shadow models, audit trainings, sweeps) on this Dask scheduler instead of "
         "local processes ([dist] extra); same results for the same seeds.")


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    raise TypeError(f"not JSON serialisable: {type(v)}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_plain)


def emit_json(obj: Any) -> None:
    click.echo(dumps(obj))


def handle_errors(fn: Callable) -> Callable:
    """Turn EdgeDPError (and bad input) into a one-line message and a non-zero exit.

    Under --json the error is also printed as {"error": "ERR_…", "message": "…"} on stdout."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = kwargs.get("as_json", False)
        try:
            return fn(*args, **kwargs)
        except EdgeDPError as exc:
            code, status, msg = exc.code, exc.exit_code, str(exc)
        except (ValueError, OSError) as exc:
            code, status, msg = "ERR_INPUT", 4, str(exc)
        if as_json:
            emit_json({"error": code, "message": msg})
        click.echo(f"edgedp: error: {msg}", err=True)
        sys.exit(status)
    return wrapper
