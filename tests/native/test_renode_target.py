"""The renode target without Renode: the missing-Renode error, and the whole
target (command line, console socket, Monitor commands on stdin, boot banner,
shutdown) against a stand-in `renode` executable that runs the native build
of the firmware (build/host/edgedp) behind the socket it is told to open."""
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
HOST_EXE = ROOT / "build" / "host" / "edgedp"

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
    if not HOST_EXE.exists():
        pytest.skip("build/host/edgedp not built (make host)")
    exe = tmp_path / "renode"
    exe.write_text(FAKE_RENODE.format(python=sys.executable, host_exe=HOST_EXE))
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
        dev = connect(t, timeout=10)
        assert dev.info().board
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
