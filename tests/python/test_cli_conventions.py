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
    assert (ExitCode.USAGE, ExitCode.TRANSPORT, ExitCode.BAD_INPUT, ExitCode.STATE_UNKNOWN, ExitCode.REFUSED,
            ExitCode.INTERRUPTED) == (2, 3, 4, 6, 8, 130)


def test_the_device_errors_carry_their_row_of_the_table() -> None:
    from edgedp.device import errors as E
    from edgedp.cli.exit_codes import for_exception
    for cls, code in ((E.EdgeDPError, ExitCode.FAILED), (E.TransportError, ExitCode.TRANSPORT),
                      (E.StateMismatch, ExitCode.STATE_MISMATCH), (E.StateUnknown, ExitCode.STATE_UNKNOWN),
                      (E.NotAuthentic, ExitCode.NOT_AUTHENTIC)):
        assert cls.exit_code == code and for_exception(cls("x")) == code, cls
    assert for_exception(E.DeviceError(E.ErrorCode.ERR_BUDGET, 0)) == ExitCode.REFUSED
    assert for_exception(E.EdgeDPError("pass --key-file", "ERR_AUTH")) == ExitCode.REFUSED
    assert for_exception(ValueError("x")) == ExitCode.BAD_INPUT


def test_shell_completion_lists_commands() -> None:
    r = run(env={"_EDGEDP_COMPLETE": "bash_complete", "COMP_WORDS": "edgedp qu", "COMP_CWORD": "1"})
    assert "query" in r.stdout, r.stdout + r.stderr


def test_sample_without_an_epsilon_is_a_usage_error(tmp_path, monkeypatch) -> None:
    """--epsilon has edgedp.toml's value as its default, so click cannot enforce it: the command
    says what is missing (exit 2), never a traceback."""
    from click.testing import CliRunner
    from edgedp.cli import main
    (tmp_path / "edgedp.toml").write_text("[defaults]\n")  # no epsilon there either
    monkeypatch.setenv("EDGEDP_CONFIG", str(tmp_path / "edgedp.toml"))
    r = CliRunner().invoke(main, ["sample", "--target", "host", "--n", "10", "--out", str(tmp_path / "z.npy")])
    assert r.exit_code == 2 and "needs --epsilon" in r.output, (r.exit_code, r.output, r.exception)
    assert "Traceback" not in r.output and not (tmp_path / "z.npy").exists()
