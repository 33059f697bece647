"""fleet add -> a query -> fleet sync -> fleet status through the real `edgedp` command, against
two QEMU test images kept running by the test on loopback serial sockets (as boards on a serial
line would be), a registry and a keystore of the test's own. One device's keystore key is its
image's key; the other's is not, so its STATE does not authenticate; a third is unreachable.
sync's exit code follows the documented precedence (not authentic 7 before unreachable 3)."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgedp.device.targets.qemu import free_port, qemu_argv

from ..helpers import KEY, ROOT, make, run_cli


@pytest.fixture(scope="module")
def boards() -> Iterator[list[int]]:
    make("build/qemu/edgedp.elf")
    procs, ports = [], []
    with tempfile.TemporaryDirectory(prefix="edgedp-fleet-") as tmp:
        for i in range(2):
            port = free_port()
            argv = qemu_argv(ROOT / "build/qemu/edgedp.elf", 1, port, str(Path(tmp) / f"qmp{i}.sock"),
                             icount=False, wait=False)
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            ports.append(port)
        try:
            yield ports
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=10)


def write_key(folder: Path, device_id: str, hex_key: str) -> None:
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{device_id}.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(hex_key + "\n")


def test_fleet_add_query_sync_status(boards: list[int], tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    env = {"EDGEDP_REGISTRY": f"sqlite:///{tmp_path / 'registry.sqlite'}", "EDGEDP_KEYSTORE": str(keys)}
    write_key(keys, "good", Path(KEY).read_text().strip())  # the key the test image holds
    write_key(keys, "forged", secrets.token_hex(32))       # not the device's key
    write_key(keys, "gone", secrets.token_hex(32))
    urls = [f"socket://127.0.0.1:{p}" for p in boards]
    for dev, url in (("good", urls[0]), ("forged", urls[1]), ("gone", f"socket://127.0.0.1:{free_port()}")):
        r = run_cli("fleet", "add", dev, "--target", url, env=env)
        assert r.returncode == 0, r.stderr
    r = run_cli("fleet", "list", "--json", env=env)
    assert [d["id"] for d in json.loads(r.stdout)] == ["forged", "gone", "good"]

    r = run_cli("fleet", "sync", "good", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = np.load(ROOT / "examples/logits.npy")[:3]
    np.save(tmp_path / "rows.npy", rows)
    r = run_cli("query", "--target", urls[0], "--key-file", KEY, str(tmp_path / "rows.npy"), "--json", env=env)
    assert r.returncode == 0, r.stderr

    r = run_cli("fleet", "sync", "--json", env={**env, "EDGEDP_TIMEOUT": "5"})
    out = {o["id"]: o["outcome"] for o in json.loads(r.stdout)}
    assert out == {"good": "ok", "forged": "not-authentic", "gone": "unreachable"}, r.stdout
    assert r.returncode == 7, (r.returncode, r.stderr)  # not authentic before unreachable

    r = run_cli("fleet", "status", "--json", env=env)
    assert r.returncode == 0, r.stderr
    st = {d["id"]: d for d in json.loads(r.stdout)}
    good = st["good"]
    assert good["authenticated"] is True and good["last_seen"] is not None
    assert good["daily_spent"] > 0 and good["lifetime_spent"] >= good["daily_spent"]  # the 3 rows were charged
    assert good["alerts"] == []
    assert st["forged"]["authenticated"] is False and st["forged"]["daily_spent"] is None
    assert [a["kind"] for a in st["forged"]["alerts"]] == ["not-authentic"]
    assert [a["kind"] for a in st["gone"]["alerts"]] == ["unreachable"]
    r = run_cli("fleet", "status", env=env)
    assert "good" in r.stdout and "alert not-authentic" in r.stdout


def test_qemu_path_target_boots_that_image(tmp_path: Path) -> None:
    make("build/qemu/edgedp.elf")
    image = tmp_path / "copy.elf"
    image.write_bytes((ROOT / "build/qemu/edgedp.elf").read_bytes())
    r = run_cli("budget", "--target", f"qemu:{image}", "--key-file", KEY, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["authenticated"] is True
    r = run_cli("budget", "--target", f"qemu:{tmp_path}/none.elf", "--json")
    assert r.returncode == 2 and "no such image" in r.stderr, r.stderr
    r = run_cli("budget", "--target", "qemu:nosuch", "--json")  # a name, not a path: unknown
    assert r.returncode != 0 and "qemu:nosuch" in r.stderr, r.stderr


def start_qemu(image: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = qemu_argv(image, 1, port, str(tmp / f"qmp-{port}.sock"), icount=False, wait=False)
    return (subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            f"socket://127.0.0.1:{port}")


def test_provision_two_qemu_devices_end_to_end(tmp_path: Path) -> None:
    """provision -> --target qemu:IMAGE -> fleet add -> a query -> fleet sync -> fleet status."""
    keys = tmp_path / "keys"
    env = {"EDGEDP_REGISTRY": f"sqlite:///{tmp_path / 'registry.sqlite'}", "EDGEDP_KEYSTORE": str(keys)}
    made = {}
    for dev in ("emu-1", "emu-2"):
        r = run_cli("provision", "--id", dev, "--board", "qemu", "--json", env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        made[dev] = json.loads(r.stdout)
        assert {"id", "board", "image", "model", "image_sha256"} <= set(made[dev])
        assert made[dev]["emulated"] is True and len(made[dev]["key_fingerprint"]) == 32
        key = keys / f"{dev}.key"
        assert key.stat().st_mode & 0o777 == 0o600 and keys.stat().st_mode & 0o777 == 0o700
        assert key.read_text().strip() != Path(KEY).read_text().strip()
        assert made[dev]["key_fingerprint"] not in key.read_text()
    assert made["emu-1"]["key_fingerprint"] != made["emu-2"]["key_fingerprint"]
    r = run_cli("provision", "--id", "emu-1", "--board", "qemu", env=env)  # an id keeps its key
    assert r.returncode != 0 and "already has a key" in r.stderr, r.stderr

    image = made["emu-1"]["image"]
    r = run_cli("budget", "--target", f"qemu:{image}", "--key-file", str(keys / "emu-1.key"), "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["authenticated"] is True, r.stderr
    r = run_cli("budget", "--target", f"qemu:{image}", "--key-file", KEY, "--json", env=env)
    assert r.returncode == 7, (r.returncode, r.stderr)  # the test key does not verify its STATE

    procs = []
    try:
        for dev in ("emu-1", "emu-2"):
            p, url = start_qemu(Path(made[dev]["image"]), tmp_path)
            procs.append(p)
            assert run_cli("fleet", "add", dev, "--target", url, env=env).returncode == 0
        url1 = run_cli("fleet", "list", "--json", env=env)
        url1 = {d["id"]: d["target"] for d in json.loads(url1.stdout)}["emu-1"]
        np.save(tmp_path / "rows.npy", np.load(ROOT / "examples/logits.npy")[:2])
        r = run_cli("query", "--target", url1, "--key-file", str(keys / "emu-1.key"), str(tmp_path / "rows.npy"),
                    "--json", env=env)
        assert r.returncode == 0, r.stderr
        r = run_cli("fleet", "sync", "--json", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        rows = {d["id"]: d for d in json.loads(run_cli("fleet", "status", "--json", env=env).stdout)}
        assert rows["emu-1"]["authenticated"] and rows["emu-2"]["authenticated"]
        assert rows["emu-1"]["daily_spent"] > 0 and rows["emu-2"]["daily_spent"] == 0
        assert rows["emu-1"]["note"] == "emulated, not private" and rows["emu-1"]["private"] is False
        assert rows["emu-1"]["key_fingerprint"] == made["emu-1"]["key_fingerprint"]
        assert "emulated, not private" in run_cli("fleet", "status", env=env).stdout
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
