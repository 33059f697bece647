"""One rule for every key file the tool reads (issue 39 item 12): readable or writable by group or
others is refused with the chmod to run, before anything is sent; a file holding the public test
key is used with a warning. The target is a closed port: a key that passed would end in a
transport error instead."""
from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from ..helpers import KEY, one_line_error, run_cli

NOWHERE = "socket://127.0.0.1:9"
COMMANDS = [["budget"], ["audit-log"], ["admin", "reset-budget"], ["admin", "config", "-e", "1"]]


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("mode,how", [(0o644, "readable by group and others"), (0o660, "readable and writable by group"),
                                      (0o606, "readable and writable by others")])
def test_a_key_file_others_can_read_or_write_is_refused(tmp_path: Path, cmd: list[str], mode: int, how: str) -> None:
    key = tmp_path / "k.key"
    key.write_text(secrets.token_hex(32) + "\n")
    key.chmod(mode)
    r = run_cli(*cmd, "--target", NOWHERE, "--key-file", str(key))
    one_line_error(r, f"key file {key} is {how}; run: chmod 600 {key}")
    assert r.returncode == 4
    key.chmod(0o600)
    r = run_cli(*cmd, "--target", NOWHERE, "--key-file", str(key))
    assert r.returncode == 3 and "cannot open" in r.stderr, r.stderr  # the key passed: the link failed


def test_the_public_test_key_is_used_whatever_its_mode(tmp_path: Path) -> None:
    """The test key is public, so its mode protects nothing: used silently (tests/keys ships it 0644)."""
    key = tmp_path / "test.key"
    key.write_text(Path(KEY).read_text())
    key.chmod(0o644)
    r = run_cli("budget", "--target", NOWHERE, "--key-file", str(key))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "cannot open" in r.stderr, r.stderr
