"""The ``edgedp`` command: one module per command group, registered here."""
from __future__ import annotations

import click

from .. import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="edgedp")
def main() -> None:
    """Differential-privacy output layer for Cortex-M4: device tools and privacy analysis."""


