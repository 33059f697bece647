"""`edgedp device start|status|stop` with the firmware in QEMU, through the installed command.

Every test runs the `edgedp` command in a child process, as a user would, with its own
state directory (EDGEDP_STATE_DIR); QEMU outlives each command and is stopped at the end."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgedp.device.client import Device
from edgedp.device.elf import sections
from edgedp.device.session import persistent_regions
from edgedp.device.targets import start_target
from edgedp.device.targets.qemu import qmp

from ..helpers import DAY, KEY, ROOT, cli_env, make, run_cli

pytestmark = pytest.mark.hil
NOON = 1796040000 // DAY * DAY + DAY // 2  # mid-day: the clock restored at start stays on this day


class Cli:
    """`edgedp` (helpers.run_cli) with its own state directory."""

    def __init__(self, state: Path):
        self.state = state
        self.env = cli_env({"EDGEDP_STATE_DIR": str(state)})  # the whole environment, for start_cli too

    def __call__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
                 ) -> subprocess.CompletedProcess:
        return run_cli(*args, env={**self.env, **(env or {})}, cwd=cwd)

    def ok(self, *args: str) -> str:
        r = self(*args)
        assert r.returncode == 0, f"edgedp {' '.join(args)}: rc {r.returncode}\n{r.stdout}{r.stderr}"
        return r.stdout

    def json(self, *args: str) -> dict:
        return json.loads(self.ok(*args, "--json"))

    def pid(self) -> int:
        return json.loads((self.state / "session.json").read_text())["pid"]


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "state")
    yield c
    if (c.state / "session.json").exists():
        c("device", "stop")


def test_admin_on_a_fresh_emulator_says_the_change_ends_with_it(cli: Cli) -> None:
    """admin config / set-time / reset-budget on a device started for the one command (issue 20.7)."""
    for target, args in (("qemu", ["config", "--epsilon", "0.5"]), ("posix", ["set-time", "--unix", str(NOON)]),
                         ("posix", ["reset-budget"])):
        r = cli("admin", *args, "--key-file", KEY, "--target", target)
        assert r.returncode == 0, r.stderr
        assert "gone when it exits" in r.stderr and "`edgedp device start`" in r.stderr, (target, args, r.stderr)
    assert cli.json("admin", "reset-budget", "--key-file", KEY, "--target", "posix")["lost_at_exit"] is True


def test_restored_memory_is_outside_what_the_startup_code_writes() -> None:
    """start loads the saved bytes before reset; the startup code then copies .data and
    zeroes .bss (firmware/ports/common/startup.c): .noinit must overlap neither."""
    make("build/qemu/edgedp.elf")
    elf = ROOT / "build/qemu/edgedp.elf"
    secs = sections(elf)
    regions = persistent_regions(elf)
    assert [r.name for r in regions] == [".noinit"] and regions[0].size >= 256  # the store's two slots
    for name in (".data", ".bss"):
        s = secs[name]
        for r in regions:
            assert r.addr >= s.addr + s.size or r.addr + r.size <= s.addr, (name, r)


def test_config_clock_and_spend_survive_stop_and_start(cli: Cli, tmp_path: Path) -> None:
    """The README's sequence: start, config, set-time, query, stop, start, budget."""
    rows = tmp_path / "rows.npy"
    np.save(rows, np.array([[0.1, 0.7, 0.2], [0.3, 0.3, 0.4]], dtype=np.float32))

    started = cli.json("device", "start")
    assert started["target"] == "qemu" and not started["restored"]
    assert [r["name"] for r in started["regions"]] == [".noinit"]
    r = cli("admin", "config", "--key-file", KEY, "--epsilon", "1.0", "--daily-cap", "10")
    assert r.returncode == 0 and "gone when it exits" not in r.stderr  # the session keeps it
    cli.ok("admin", "set-time", "--key-file", KEY, "--unix", str(NOON))
    cli.ok("query", str(rows))
    before = cli.json("budget")
    assert before["daily_spent"] == pytest.approx(2.0) and before["day"] == NOON // DAY

    stopped = cli.json("device", "stop")
    assert stopped["saved"] and len(stopped["files"]) == 1
    assert Path(stopped["files"][0]).stat().st_size == started["regions"][0]["size"]

    assert cli.json("device", "start")["restored"]
    after = cli.json("budget")
    assert after["store"] == "loaded"
    for k in ("daily_spent", "lifetime_spent", "daily_cap", "epsilon_per_query", "auth_counter", "day"):
        assert after[k] == before[k], k
    # A fresh QEMU (--target qemu) does not see the session's store.
    assert cli.json("budget", "--target", "qemu")["store"] == "fresh"

    # Resetting the session's device keeps the spend made since the start. (A QMP
    # system_reset would not: QEMU writes the loader's bytes, the memory of the last stop,
    # again at every reset.)
    cli.ok("query", str(rows))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EDGEDP_STATE_DIR", str(cli.state))
        t = start_target("session")
        try:
            dev = Device(t.link(), timeout=20, target=t)
            dev.sync()
            assert dev.budget().daily_spent == 4_000_000
            t.reset()
            dev.sync()
            assert dev.budget().daily_spent == 4_000_000
        finally:
            t.close()
    assert cli.json("budget")["daily_spent"] == pytest.approx(4.0)


def test_start_stop_status_errors_stale_state_and_precedence(cli: Cli) -> None:
    r = cli("device", "stop")
    assert r.returncode == 1 and "no device session is running" in r.stderr
    r = cli("info", "--target", "session")
    assert r.returncode == 3 and "no device session is running" in r.stderr

    first = cli.json("device", "start")
    r = cli("device", "start")
    assert r.returncode == 1 and "already running" in r.stderr and str(first["pid"]) in r.stderr
    status = cli.json("device", "status")
    assert status["running"] and status["session"]["pid"] == first["pid"]
    # EDGEDP_TARGET (like --target) beats the session.
    r = cli("info", "--json", env={"EDGEDP_TARGET": "posix"})
    assert r.returncode == 0 and json.loads(r.stdout)["board"] == "posix"

    os.kill(first["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (status := json.loads(cli("device", "status", "--json").stdout))["running"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert status["stale"]
    r = cli("budget")  # no silent fallback to a fresh QEMU
    assert r.returncode == 3 and "no longer running" in r.stderr
    r = cli("device", "start")
    assert r.returncode == 1 and "removed the state" in r.stderr and "--accept-rollback" in r.stderr
    assert not (cli.state / "session.json").exists()
    r = cli("device", "start", "--accept-rollback")
    assert r.returncode == 0 and "no memory was ever saved" in r.stderr and cli.pid() != first["pid"]
    cli.ok("device", "stop")

    manifest = cli.state / "memory" / "qemu.json"
    m = json.loads(manifest.read_text())
    m["regions"][0]["addr"] += 4
    manifest.write_text(json.dumps(m))
    r = cli("device", "start")
    assert r.returncode == 1 and "--fresh" in r.stderr and not (cli.state / "session.json").exists()
    assert not cli.json("device", "start", "--fresh")["restored"]


def test_a_killed_session_never_rolls_the_budget_back_silently(cli: Cli, tmp_path: Path) -> None:
    """kill -9 of the session's QEMU after answers the last stop did not save: start refuses and
    states the saved spend; only --accept-rollback starts from the older memory (issue 17.5)."""
    rows = tmp_path / "rows.npy"
    np.save(rows, np.array([[0.1, 0.7, 0.2], [0.3, 0.3, 0.4]], dtype=np.float32))
    cli.ok("device", "start", "--fresh")
    cli.ok("admin", "config", "--key-file", KEY, "--epsilon", "1.0", "--daily-cap", "30")
    cli.ok("admin", "set-time", "--key-file", KEY, "--unix", str(NOON))
    cli.ok("query", str(rows))
    cli.ok("device", "stop")                       # saved: 2 epsilon spent
    cli.ok("device", "start")
    for _ in range(3):
        cli.ok("query", str(rows))
    assert cli.json("budget")["lifetime_spent"] == pytest.approx(8.0)
    os.kill(cli.pid(), signal.SIGKILL)             # the 6 epsilon since the stop are only in QEMU
    deadline = time.monotonic() + 10
    while json.loads(cli("device", "status", "--json").stdout)["running"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    r = cli("device", "start")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--accept-rollback" in r.stderr and "holds a spend of 2 epsilon" in r.stderr
    assert "daily cap of 30 epsilon" in r.stderr
    assert not (cli.state / "session.json").exists(), "a refused start must not leave a session running"
    assert cli("device", "start").returncode == 1  # still refused: nothing was accepted yet
    r = cli("device", "start", "--accept-rollback")
    assert r.returncode == 0 and "accepting the rollback" in r.stderr
    assert cli.json("budget")["lifetime_spent"] == pytest.approx(2.0)  # what was stated and accepted
    cli.ok("device", "stop")
    cli.ok("device", "start")                      # a clean stop needs no acceptance


def test_another_targets_session_does_not_clear_the_unclean_mark(cli: Cli, tmp_path: Path) -> None:
    """Issue 39 item 5: after kill -9 of a qemu session, a session of qemu:stm32f4 started and
    stopped cleanly leaves the qemu mark alone: a plain `device start` still refuses, and only
    --accept-rollback gives the spend back (the old host kept one unclean.json for every target:
    the stm32f4 session's start deleted it and the next start rolled 20 epsilon back to 10)."""
    rows = tmp_path / "rows.npy"
    np.save(rows, np.full((5, 3), 0.3, dtype=np.float32))
    cli.ok("device", "start", "--fresh")
    cli.ok("admin", "config", "--key-file", KEY, "--epsilon", "2.0", "--daily-cap", "50")
    cli.ok("admin", "set-time", "--key-file", KEY, "--unix", str(NOON))
    cli.ok("query", str(rows))
    cli.ok("device", "stop")                       # saved: 10 epsilon
    cli.ok("device", "start")
    cli.ok("query", str(rows))
    assert cli.json("budget")["lifetime_spent"] == pytest.approx(20.0)
    os.kill(cli.pid(), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while json.loads(cli("device", "status", "--json").stdout)["running"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    r = cli("device", "start", "--target", "qemu:stm32f4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removed the state" in r.stderr  # the killed session's, found by this start
    cli.ok("device", "stop")
    r = cli("device", "start")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--accept-rollback" in r.stderr and "holds a spend of 10 epsilon" in r.stderr, r.stderr
    assert not (cli.state / "session.json").exists() and (cli.state / "memory" / "qemu.unclean.json").is_file()
    r = cli("device", "start", "--accept-rollback")
    assert r.returncode == 0 and "accepting the rollback" in r.stderr, r.stderr
    assert cli.json("budget")["lifetime_spent"] == pytest.approx(10.0)
    assert not (cli.state / "memory" / "qemu.unclean.json").exists()
    cli.ok("device", "stop")
    cli.ok("device", "start")                      # accepted, then a clean stop: no mark


def test_readme_session_example_runs_as_written(cli: Cli) -> None:
    """Every command of the README's session block succeeds in order (issue 20.10: the query of its
    20 sample rows fits the daily cap it configures), and the block ends with no session running."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("K=tests/keys/test-device.key"):]
    block = block[:block.index("```")]
    lines = [ln.split("#", 1)[0].strip() for ln in block.splitlines()[1:]]
    for line in filter(None, lines):
        args = [a.replace("$K", KEY) for a in line.split()[1:]]
        r = cli(*args, cwd=ROOT)
        assert r.returncode == 0, f"{line}: rc {r.returncode}\n{r.stdout}{r.stderr}"
    assert not (cli.state / "session.json").exists()


WFI = 0xBF30
"""The Thumb encoding of WFI (ARMv7-M ARM, A7.7.261)."""


def halted_after(qmp_path: str) -> int:
    """Stop the VM (QMP), and return the halfword before its PC: WFI when the CPU sleeps in it
    (QEMU halts the CPU with the PC past the instruction); then let it run on."""
    qmp(qmp_path, "stop")
    try:
        regs = qmp(qmp_path, "human-monitor-command", {"command-line": "info registers"})["return"]
        pc = int(re.search(r"R15=([0-9a-f]{8})", regs).group(1), 16)
        mem = qmp(qmp_path, "human-monitor-command", {"command-line": f"x /1hx {pc - 2:#x}"})["return"]
        return int(mem.split(":")[1].split()[0], 16)
    finally:
        qmp(qmp_path, "cont")


def test_an_idle_session_sleeps_and_wakes_for_a_request(cli: Cli, tmp_path: Path) -> None:
    """The firmware waits for a byte in WFI (ports/qemu), so an idle session's QEMU takes almost
    no host CPU: QEMU runs no halted CPU until an interrupt (the polling firmware kept a core
    busy: 2.99 s of CPU in 3 s, idle machine). Stopped at any moment after `device start` (which
    returns once the firmware has answered), the CPU is halted in that WFI; and the first byte of
    a request wakes it. (No CPU-time measurement: it would depend on the machine's load.)"""
    cli.ok("device", "start", "--fresh")
    qmp_path = json.loads((cli.state / "session.json").read_text())["qmp"]
    assert [halted_after(qmp_path) for _ in range(3)] == [WFI] * 3
    np.save(tmp_path / "rows.npy", np.full((3, 10), 0.5, dtype=np.float32))
    cli.ok("admin", "config", "--key-file", KEY, "--epsilon", "1", "--target", "session")
    out = cli.ok("query", str(tmp_path / "rows.npy"), "--json", "--target", "session")
    assert [json.loads(x)["status"] for x in out.splitlines()] == ["ok"] * 3
