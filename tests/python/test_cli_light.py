"""The command line loads only what a command needs: `edgedp --help` and the device commands
import none of the [analysis], [bench] or [robot] extras."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from edgedp.cli import COMMANDS

HEAVY = ("sklearn", "matplotlib", "unicorn", "capstone", "elftools", "dp_accounting", "joblib", "robot", "scipy")


def modules_after(code: str) -> list[str]:
    """Heavy top-level modules imported by a fresh interpreter running code."""
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.splitlines()[-1].split())
    return sorted(loaded & set(HEAVY))


def test_importing_the_cli_loads_no_extra() -> None:
    assert modules_after("import edgedp.cli") == []
    assert modules_after("from edgedp import open_device, Mode, MechConfig") == []


@pytest.mark.parametrize("module", sorted({e.module for e in COMMANDS.values() if not e.extra}))
def test_device_commands_load_no_extra(module: str) -> None:
    assert modules_after(f"import edgedp.cli.{module}") == []


def test_help_lists_every_command_without_importing_them() -> None:
    code = ("from edgedp.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n")
    assert modules_after(code) == []
    # The console script itself (its speed is what the import checks above bound; no timing here).
    r = subprocess.run([str(Path(sys.executable).with_name("edgedp")), "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and all(name in r.stdout for name in COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_table_matches_the_commands(name: str) -> None:
    entry = COMMANDS[name]
    cmd = getattr(importlib.import_module(f"edgedp.cli.{entry.module}"), entry.attr)
    assert " ".join((cmd.help or "").split()).startswith(entry.summary)
