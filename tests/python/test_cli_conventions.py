"""The exit-code table and shell completion of the `edgedp` command (no device)."""
from __future__ import annotations

import os
import subprocess

from edgedp.cli.exit_codes import ExitCode

from ..conftest import ROOT

EDGEDP = str(ROOT / ".venv/bin/edgedp")


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("EDGEDP_TARGET", "EDGEDP_CONFIG")}
    return subprocess.run([EDGEDP, *args], capture_output=True, text=True, timeout=120, env={**e, **(env or {})})


def test_the_table_is_distinct() -> None:
    codes = [int(c) for c in ExitCode]
    assert len(set(codes)) == len(codes)
    assert (ExitCode.USAGE, ExitCode.BAD_INPUT, ExitCode.REFUSED, ExitCode.TRANSPORT, ExitCode.STATE_UNKNOWN,
            ExitCode.INTERRUPTED) == (2, 3, 4, 5, 6, 130)


def test_shell_completion_lists_commands() -> None:
    r = run(env={"_EDGEDP_COMPLETE": "bash_complete", "COMP_WORDS": "edgedp qu", "COMP_CWORD": "1"})
    assert "query" in r.stdout, r.stdout + r.stderr
