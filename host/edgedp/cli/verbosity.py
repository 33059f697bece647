"""-q and -v: what goes to stderr besides errors (cli/common.py re-exports these)."""
from __future__ import annotations

import warnings
from typing import TextIO

import click

_verbosity = 0


def set_verbosity(level: int) -> None:
    """-q (−1): errors only; default (0): errors, warnings and notes; -v (1): also details."""
    global _verbosity
    _verbosity = level


def quiet() -> bool:
    return _verbosity < 0


def progress(no_progress: bool) -> bool:
    """Whether to show progress bars: not under --no-progress or -q."""
    return not (no_progress or quiet())


def note(message: str) -> None:
    """A warning or note on stderr (not under -q)."""
    if _verbosity >= 0:
        click.echo(message, err=True)


def detail(message: str) -> None:
    """A detail on stderr (only under -v)."""
    if _verbosity > 0:
        click.echo(message, err=True)


_PYTHON_SHOWWARNING = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    if category.__module__.startswith("edgedp."):
        note(f"edgedp: warning: {message}")
    else:
        _PYTHON_SHOWWARNING(message, category, filename, lineno, file, line)


def warnings_as_notes() -> None:
    """Show the package's own warnings (e.g. edgedp.train.run.LargeDeltaWarning) as one line
    ``edgedp: warning: ...`` (not under -q); other warnings as Python shows them."""
    warnings.showwarning = _show_warning
