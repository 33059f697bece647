"""The ``edgedp`` command: one module per command group, registered here."""
from __future__ import annotations

import click

from .. import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="edgedp")
def main() -> None:
    """Differential-privacy output layer for Cortex-M4: device tools and privacy analysis."""


from .demo import demo  # noqa: E402
from .device import COMMANDS as _DEVICE_COMMANDS  # noqa: E402
from .session import device as _session  # noqa: E402
from .verify import verify  # noqa: E402

for _cmd in (*_DEVICE_COMMANDS, _session, verify, demo):
    main.add_command(_cmd)

from .analysis import COMMANDS as _ANALYSIS_COMMANDS  # noqa: E402

for _cmd in _ANALYSIS_COMMANDS:
    main.add_command(_cmd)

from .bench import bench  # noqa: E402

main.add_command(bench)

from .train import COMMANDS as _TRAIN_COMMANDS  # noqa: E402

for _cmd in _TRAIN_COMMANDS:
    main.add_command(_cmd)
