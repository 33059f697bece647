"""`make provision` (and `edgedp provision`) refuses the public test key (under any file name),
accepts a real key, and provisions the model the image was built with."""
from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from ..helpers import ROOT, one_line_error, run_cli

TEST_KEY = ROOT / "tests/keys/test-device.key"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree of its own (what the wheel packages: Makefile, firmware/, the test key), so the
    images it builds never replace the ones other tests run."""
    t = tmp_path / "tree"
    t.mkdir()
    shutil.copy(ROOT / "Makefile", t)
    shutil.copytree(ROOT / "firmware", t / "firmware")
    (t / "tests/keys").mkdir(parents=True)
    shutil.copy(TEST_KEY, t / "tests/keys")
    return t


def provision(tree: Path, key: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-C", str(tree), "provision", f"KEY={key}", *more], capture_output=True, text=True)


@pytest.mark.parametrize("where", ["the test key file", "a copy in upper case"])
def test_provision_refuses_the_public_test_key(tree: Path, tmp_path: Path, where: str) -> None:
    key = TEST_KEY
    if where != "the test key file":
        key = tmp_path / "device.key"
        key.write_text(TEST_KEY.read_text().strip().upper() + "\n")
    r = provision(tree, key, "MODEL=firmware/model/none.c")
    assert r.returncode != 0
    assert "refusing the public test key" in r.stderr
    assert not (tree / "build/stm32f4/edp_key.bin").exists()
    assert not (tree / "build/stm32f4/edgedp-provisioned.elf").exists()


def test_provision_accepts_a_fresh_key(tree: Path, tmp_path: Path) -> None:
    secret = secrets.token_bytes(32)
    key = tmp_path / "device.key"
    key.write_text(secret.hex() + "\n")
    r = provision(tree, key, "MODEL=firmware/model/none.c")  # 0644, as the shell's umask makes it: refused
    assert r.returncode != 0 and f"key file {key} is readable or writable by group or others (mode 644); " \
        f"run: chmod 600 {key}" in r.stderr, r.stderr
    key.chmod(0o600)
    r = provision(tree, key, "MODEL=firmware/model/none.c")
    assert r.returncode == 0, r.stderr
    assert (tree / "build/stm32f4/edp_key.bin").read_bytes() == secret
    out = tmp_path / "key.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".edp_key",
                    str(tree / "build/stm32f4/edgedp-provisioned.elf"), str(out)], check=True)
    assert out.read_bytes() == secret


def fresh_key(tmp_path: Path) -> tuple[Path, bytes]:
    secret = secrets.token_bytes(32)
    key = tmp_path / "device.key"
    key.write_text(secret.hex() + "\n")
    key.chmod(0o600)
    return key, secret


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_provision_uses_the_model_the_image_was_built_with(tree: Path, tmp_path: Path) -> None:
    """issue 39 item 2: after `edgedp build --model mine.c`, `make provision KEY=...` rebuilt the
    image with digits_ensemble.c. It provisions the recorded model, says which and the image's
    hash, and builds the default only when named; before any build it refuses."""
    key, secret = fresh_key(tmp_path)
    stm = tree / "build/stm32f4"
    r = provision(tree, key)
    assert r.returncode == 2 and "records no model (it was not built yet): name the model" in r.stderr, r.stderr
    assert not (stm / "edgedp.elf").exists() and not (stm / "edp_key.bin").exists()  # nothing built

    mine = tmp_path / "mine.c"
    shutil.copy(ROOT / "firmware/model/digits_logreg.c", mine)
    r = run_cli("build", "--model", str(mine), "--target", "qemu:stm32f4", env={"EDGEDP_ROOT": str(tree)})
    assert r.returncode == 0, r.stderr
    r = provision(tree, key)
    assert r.returncode == 0, r.stderr
    assert (stm / "model.c").read_text() == mine.read_text()  # the image still holds mine.c
    assert f"model {mine} (sha256 {sha256(mine)}), image build/stm32f4/edgedp.elf sha256 " \
           f"{sha256(stm / 'edgedp.elf')}" in r.stdout, r.stdout
    assert (stm / "edp_key.bin").read_bytes() == secret
    for f in ("edp_key.bin", "edgedp-provisioned.elf"):  # both hold the key: private to the user
        assert (stm / f).stat().st_mode & 0o077 == 0, f

    # the same through the CLI, from the recorded model
    r = run_cli("provision", "--key-file", str(key), "--json", env={"EDGEDP_ROOT": str(tree)})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model_file"] == str(mine) and d["model"]["name"] == "digits-logreg", d
    assert d["image_sha256"] == sha256(stm / "edgedp.elf") and (stm / "model.c").read_text() == mine.read_text()

    # the default, named
    default = "firmware/model/digits_ensemble.c"
    r = provision(tree, key, f"MODEL={default}")
    assert r.returncode == 0, r.stderr
    assert f"model {default} (sha256 {sha256(ROOT / default)})" in r.stdout, r.stdout
    assert (stm / "model.c").read_text() == (ROOT / default).read_text()


def test_cli_provision_refuses_without_a_model_and_with_the_test_key(tree: Path, tmp_path: Path) -> None:
    key, _ = fresh_key(tmp_path)
    env = {"EDGEDP_ROOT": str(tree)}
    one_line_error(run_cli("provision", "--key-file", str(key), env=env), "records no model (it was not built yet)")
    public = tmp_path / "public.key"  # the test key, kept as a real key would be (no warning about its mode)
    public.write_text(TEST_KEY.read_text().upper())
    public.chmod(0o600)
    one_line_error(run_cli("provision", "--key-file", str(public), "--model", str(ROOT / "firmware/model/none.c"),
                           env=env), "refusing the public test key")
    assert not (tree / "build/stm32f4/edgedp.elf").exists()
