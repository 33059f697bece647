"""The renode target without Renode: the missing-Renode error, and the whole
target (command line, console socket, Monitor commands on stdin, boot banner,
shutdown) against a stand-in `renode` executable that runs the native build
of the firmware (build/posix/edgedp) behind the socket it is told to open."""
from __future__ import annotations

import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from edgedp.device.client import load_key
from edgedp.device.errors import TransportError
from edgedp.device.targets import start_target
from edgedp.device.targets import renode as renode_target

ROOT = Path(__file__).resolve().parents[2]
POSIX_EXE = ROOT / "build" / "posix" / "edgedp"

FAKE_RENODE = textwrap.dedent('''\
    #!{python}
    """Stand-in for Renode: accepts its command line, serves the Monitor on -P PORT and
    the console socket named by -e '$port=N', and runs {host_exe} as the emulated
    firmware when the Monitor says `start`."""
    import json, os, socket, subprocess, sys, threading

    args = sys.argv[1:]
    assert args[:3] == ["--disable-xwt", "--plain", "-P"], args
    monitor_port = int(args[3])
    cmds = [args[i + 1] for i in range(4, len(args), 2) if args[i] == "-e"]
    port = int(next(c for c in cmds if c.startswith("$port="))[len("$port="):])
    record = {{"argv": args, "monitor": []}}

    def listen(p):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", p))
        s.listen(1)
        return s

    mon_srv = listen(monitor_port)
    con_srv = listen(port)
    child = None
    conn = None

    def pump_out(proc):
        while True:
            data = os.read(proc.stdout.fileno(), 4096)
            if not data:
                return
            conn.sendall(data)

    def pump_in():
        while True:
            data = conn.recv(4096)
            if not data:
                return
            if child is not None:
                child.stdin.write(data)
                child.stdin.flush()

    def boot():
        global child
        child = subprocess.Popen(["{host_exe}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        threading.Thread(target=pump_out, args=(child,), daemon=True).start()

    mon, _ = mon_srv.accept()
    mon.sendall(b"\\xff\\xfb\\x01(monitor) ")
    conn, _ = con_srv.accept()
    threading.Thread(target=pump_in, daemon=True).start()
    for line in mon.makefile("rb"):
        line = line.decode().strip()
        record["monitor"].append(line)
        mon.sendall(b"(monitor) ")
        if line == "start":
            boot()
        elif line == "machine Reset":
            child.kill()
            boot()
        elif line == "quit":
            break
    if child is not None:
        child.kill()
    with open(os.environ["FAKE_RENODE_RECORD"], "w") as f:
        json.dump(record, f)
    ''')


def test_missing_renode_fails_at_once_with_install_instructions(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("EDGEDP_RENODE", raising=False)
    monkeypatch.setattr(renode_target, "ensure_image",
                        lambda board: pytest.fail("built the image before checking for Renode"))
    t0 = time.monotonic()
    with pytest.raises(TransportError) as info:
        start_target("renode")
    assert time.monotonic() - t0 < 1.0
    message = str(info.value)
    assert "renode" in message.lower()
    assert "https://github.com/renode/renode/releases" in message
    assert "--target qemu" in message


def test_edgedp_renode_names_a_missing_executable(monkeypatch):
    monkeypatch.setenv("EDGEDP_RENODE", "/nonexistent/renode")
    with pytest.raises(TransportError, match="EDGEDP_RENODE=/nonexistent/renode"):
        start_target("renode")


@pytest.fixture
def fake_renode(tmp_path, monkeypatch):
    if not POSIX_EXE.exists():
        pytest.skip("build/posix/edgedp not built (make posix)")
    exe = tmp_path / "renode"
    exe.write_text(FAKE_RENODE.format(python=sys.executable, host_exe=POSIX_EXE))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "record.json"
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("EDGEDP_RENODE", raising=False)
    monkeypatch.setenv("FAKE_RENODE_RECORD", str(record))
    monkeypatch.setenv("EDP_STORE_FILE", str(tmp_path / "store.bin"))
    return record


def test_renode_target_runs_the_script_and_speaks_the_protocol(fake_renode, tmp_path):
    import json

    from edgedp.device.client import connect

    elf = tmp_path / "my image.elf"  # a space: Monitor paths must escape it
    elf.write_bytes(b"")
    t = renode_target.RenodeTarget(elf=elf, start_timeout=20, boot_timeout=20)
    try:
        assert t.url == f"socket://127.0.0.1:{t.port}"
        assert t.banner.startswith("edgedp ")
        assert t.link().board_pending  # the link learns the image's buffering from INFO, as a board's
        dev = connect(t, timeout=10)
        assert dev.info().board == "posix" and not t.link().board_pending
        assert t.link().in_flight == 1  # not a board the host knows to buffer
        t.reset()
        time.sleep(0.5)
        dev.sync()
    finally:
        t.close()
    record = json.loads(fake_renode.read_text())
    argv = record["argv"]
    assert argv[:4] == ["--disable-xwt", "--plain", "-P", str(t.monitor_port)]
    assert argv[argv.index("-e") + 1] == "$elf=@" + str(elf.resolve()).replace(" ", "\\ ")
    assert f"$port={t.port}" in argv
    assert "include @" + str(ROOT / "renode" / "edgedp.resc") in argv
    assert record["monitor"] == ["start", "machine Reset", "quit"]


def test_provision_elf_writes_the_key_into_edp_key(tmp_path):
    import subprocess

    from robot_keywords import EdgedpKeywords, _section_size

    elf = ROOT / "build" / "stm32f4" / "edgedp.elf"
    if not elf.exists():
        pytest.skip("build/stm32f4/edgedp.elf not built")
    out = EdgedpKeywords().provision_elf(str(elf), str(tmp_path / "p.elf"))
    assert _section_size(out, ".edp_key") == 32
    dump = subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".edp_key", out,
                           str(tmp_path / "key.bin")], capture_output=True)
    assert dump.returncode == 0
    key = load_key()
    assert (tmp_path / "key.bin").read_bytes() == key


def test_renode_runs_the_test_image_by_default(fake_renode, monkeypatch):
    built = []

    def fake_ensure_image(board):
        built.append(board)
        return ROOT / "build" / board / "edgedp.elf"

    monkeypatch.setattr(renode_target, "ensure_image", fake_ensure_image)
    if not (ROOT / "build" / "stm32f4-test" / "edgedp.elf").exists():
        pytest.skip("build/stm32f4-test/edgedp.elf not built (make firmware)")
    t = start_target("renode")
    t.close()
    assert built == ["stm32f4-test"]
    assert t.name == "renode"
    assert t.elf == ROOT / "build" / "stm32f4-test" / "edgedp.elf"


def test_renode_path_runs_the_named_image(fake_renode, tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(renode_target, "ensure_image", lambda board: pytest.fail("built the default image"))
    elf = tmp_path / "provisioned.elf"
    elf.write_bytes(b"")
    t = start_target(f"renode:{elf}")
    t.close()
    assert t.name == f"renode:{elf}"
    argv = json.loads(fake_renode.read_text())["argv"]
    assert f"$elf=@{elf.resolve()}" in argv


def test_renode_path_must_name_an_image(tmp_path):
    from edgedp.device.targets import check_spec

    with pytest.raises(TransportError, match="no such image"):
        check_spec(f"renode:{tmp_path / 'missing.elf'}")
    with pytest.raises(TransportError, match="renode:PATH"):
        check_spec("renode-ish")


def test_renode_ticks_are_virtual_cycles_at_the_platform_mips():
    import re

    from edgedp.bench import icount
    from edgedp.device.protocol import Info, Rate

    repl = (ROOT / "renode" / "edgedp-stm32f4.repl").read_text()
    assert re.findall(r"PerformanceInMips:\s*(\d+)", repl) == [str(renode_target.PERFORMANCE_IN_MIPS)]
    info = Info("test", "loaded", True, True, "dwt", 1024, 168_000_000, Rate(), 4096, "ok", "ok", None, "0.1.0", "stm32f4")
    unit = icount.tick_unit(info, "renode")
    assert unit.ticks_per_instruction == pytest.approx(4.0)
    assert unit.instructions(5640) == pytest.approx(1410)
    assert unit.cycles(5640) == 5640
    assert unit.seconds(5640) * 1e6 == pytest.approx(5640 / 168)
    assert "virtual" in unit.describe() and "not silicon cycles" in unit.describe()
    assert icount.tick_unit(info, "renode:/some/image.elf").instructions(4) == pytest.approx(1)


def _make_n_test(tmp_path, with_renode_test: bool) -> str:
    """`make -n test` (commands printed, only the recursive $(MAKE) lines run) on a PATH with
    or without a renode-test."""
    import shutil
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "bash", "sh", "dirname", "readlink"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if with_renode_test:
        fake = bin_dir / "renode-test"
        fake.write_text("#!/bin/sh\necho fake renode-test ran >&2\nexit 1\n")
        fake.chmod(0o755)
    r = subprocess.run(["make", "-n", "--no-print-directory", "test"], cwd=ROOT, capture_output=True, text=True,
                       env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, timeout=120)
    assert "fake renode-test ran" not in r.stderr
    return r.stdout + r.stderr


def test_make_test_reports_the_renode_suite_skipped_without_renode_test(tmp_path):
    lines = _make_n_test(tmp_path, with_renode_test=False).splitlines()
    assert "SKIPPED: the Renode suite (renode/edgedp.robot): no renode-test on PATH (renode/README.md)" in lines
    assert not any("renode-test renode/edgedp.robot" in line for line in lines)


def test_make_test_runs_the_renode_suite_with_renode_test(tmp_path):
    lines = _make_n_test(tmp_path, with_renode_test=True).splitlines()
    assert not any(line.startswith("SKIPPED") for line in lines)
    assert any(line.strip().endswith("renode-test renode/edgedp.robot") for line in lines)
