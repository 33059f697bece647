"""The device session's state file without QEMU: stale, corrupt and missing states."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgedp.device import session
from edgedp.device.elf import sections
from edgedp.device.errors import TransportError
from edgedp.device.targets import start_target


def write_state(state: Path, pid: int) -> None:
    state.mkdir(parents=True, exist_ok=True)
    s = session.Session(pid, "qemu", "build/qemu/edgedp.elf", 1, str(state / "q" / "qmp.sock"), 0.0,
                        [session.Region(".noinit", 0x20000000, 272)])
    (state / session.STATE_FILE).write_text(json.dumps(s.as_dict()))


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_no_state_means_no_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEDP_STATE_DIR", str(tmp_path))
    assert session.load() is None and session.running() is None
    assert session.running_or_raise(required=False) is None
    with pytest.raises(TransportError, match="no device session is running"):
        start_target("session")
    with pytest.raises(session.SessionError, match="no device session is running"):
        session.stop()


def test_a_dead_session_is_an_error_not_a_fresh_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEDP_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("EDGEDP_TARGET", raising=False)
    pid = dead_pid()
    write_state(tmp_path, pid)
    assert session.load().pid == pid and session.running() is None
    with pytest.raises(TransportError, match=f"pid {pid}.*no longer running"):
        start_target()
    stopped = session.stop()  # clears the state, saves nothing
    assert not stopped.saved and session.load() is None


def test_forget_stale_keeps_a_live_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEDP_STATE_DIR", str(tmp_path))
    write_state(tmp_path, dead_pid())
    assert session.forget_stale() is not None and session.load() is None
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        write_state(tmp_path, live.pid)
        assert session.forget_stale() is None and session.running().pid == live.pid
    finally:
        live.kill()
        live.wait()


def test_corrupt_state_and_memory_files_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEDP_STATE_DIR", str(tmp_path))
    (tmp_path / session.STATE_FILE).write_text("{not json")
    with pytest.raises(session.SessionError, match="remove the file"):
        session.load()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "qemu.json").write_text("[")
    with pytest.raises(session.SessionError, match="--fresh"):
        session.saved_memory("qemu")
    assert session.discard_memory("qemu") and session.saved_memory("qemu") is None


def test_sections_rejects_what_is_not_a_32_bit_elf(tmp_path: Path) -> None:
    f = tmp_path / "x.elf"
    f.write_bytes(b"\x7fELF\x02\x01" + bytes(64))
    with pytest.raises(ValueError, match="32-bit little-endian"):
        sections(f)


def test_unclean_marks_are_per_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 item 5 without QEMU: a stale qemu session marks qemu alone; the mark one file for
    every target that earlier versions kept moves to the target it names (an unreadable one to
    every target), so an upgrade loses no mark."""
    monkeypatch.setenv("EDGEDP_STATE_DIR", str(tmp_path))
    write_state(tmp_path, dead_pid())
    assert session.forget_stale() is not None
    assert session.unclean_end("qemu") is not None and session.unclean_end("qemu:stm32f4") is None
    (tmp_path / "memory" / "qemu.unclean.json").unlink()
    (tmp_path / session.LEGACY_UNCLEAN_FILE).write_text(json.dumps({"target": "qemu:stm32f4", "pid": 7,
                                                                    "started": 0.0, "found": 0.0}))
    assert session.unclean_end("qemu") is None and session.unclean_end("qemu:stm32f4")["pid"] == 7
    assert not (tmp_path / session.LEGACY_UNCLEAN_FILE).exists()
    (tmp_path / session.LEGACY_UNCLEAN_FILE).write_text("{cut")
    assert session.unclean_end("qemu") is not None and session.unclean_end("qemu:stm32f4")["pid"] == 7
