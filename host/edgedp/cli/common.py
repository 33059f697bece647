"""Shared pieces of the command line: target and --json options, output, one-line errors (verbosity:
cli/verbosity.py, re-exported here)."""
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
from .config import config_default
from .verbosity import (detail as detail, note as note, progress as progress, quiet as quiet,
                        set_verbosity as set_verbosity)
from .exit_codes import ExitCode, error_name, for_exception


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
    help=f"Seconds to wait for each device answer (a deadline: stale frames do not restart it) and for the "
         f"device to boot (default {DEFAULT_TIMEOUT:g}; env {TIMEOUT_ENV}). Raise it under heavy load or on Renode.")

_target_option = click.option(
    "--target", "-t", default=config_default("target"), metavar="T", envvar="EDGEDP_TARGET",
    callback=_check_target, show_default=False,
    help="qemu, qemu:stm32f4, qemu:PATH (an image file), posix, posix:san, renode, session, or a pyserial URL such as socket://127.0.0.1:4321. "
         "Default: EDGEDP_TARGET, else edgedp.toml's target, else the running `edgedp device` session, "
         "else a fresh qemu.")


def target_option(fn: Callable) -> Callable:
    """--target and --timeout: every command that talks to a device takes both."""
    return _target_option(timeout_option(fn))


json_option = click.option("--json", "as_json", is_flag=True,
                           help="Machine-readable JSON on stdout (an error is one object {\"error\": ...}).")
progress_option = click.option("--no-progress", is_flag=True,
                               help="No progress bars (they go to stderr, also under --json; -q implies this).")

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


def fail(exc: BaseException, as_json: bool, code: ExitCode | None = None, extra: dict | None = None) -> None:
    """End the command on an error: one stderr line, one JSON object on stdout under --json
    (with the fields of ``extra`` after the error's own)."""
    status = for_exception(exc) if code is None else code
    msg = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
    if as_json:
        try:
            emit_json({"error": error_name(exc), "message": msg, "exit_code": int(status), **(extra or {})})
        except BrokenPipeError:
            close_stdout_quietly()
    click.echo(f"edgedp: error: {msg}", err=True)
    sys.exit(status)


def close_stdout_quietly() -> None:
    """stdout's reader is gone: point stdout at /dev/null so nothing more (not even Python's
    final flush) complains, as a program killed by SIGPIPE would say nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a file descriptor (click's test runner): nothing to silence
    finally:
        os.close(devnull)


def handle_errors(fn: Callable) -> Callable:
    """Turn EdgeDPError, bad input and a closed stdout into a one-line message (or none, for the
    pipe) and the exit code of cli/exit_codes.py.

    Under --json the error is also printed as {"error": "ERR_…", "message": "…", "exit_code": N}
    on stdout."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            close_stdout_quietly()
            sys.exit(ExitCode.BROKEN_PIPE)
        except (EdgeDPError, ValueError, OSError) as exc:
            fail(exc, kwargs.get("as_json", False))
    return wrapper
