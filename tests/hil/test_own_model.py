"""The user's own model reaches the device, also from an installed wheel outside this checkout
(issue 20 items 1 and 3): every step through the real `edgedp` command against QEMU."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ..helpers import require

require("sklearn", "joblib")  # the user's model is a scikit-learn one

import joblib
import numpy as np
import pytest
from sklearn.neural_network import MLPClassifier

from edgedp.paths import TEST_KEY

pytestmark = pytest.mark.hil
ROOT = Path(__file__).resolve().parents[2]
SHARED_SITE = sysconfig.get_paths()["purelib"]
N_FEATURES, N_CLASSES = 20, 4


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's directory outside the checkout: their MLP (20 features, 4 classes) and inputs."""
    d = tmp_path_factory.mktemp("user")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, N_FEATURES))
    y = (X[:, 0] > 0) + 2 * (X[:, 1] > 0)
    joblib.dump(MLPClassifier((8,), max_iter=50, random_state=0).fit(X, y), d / "mine.joblib")
    np.save(d / "x20.npy", X[:3].astype(np.float32))
    np.save(d / "x64.npy", np.zeros((2, 64), np.float32))
    np.save(d / "probs.npy", np.full((2, 10), 0.1))
    return d


def run(env: dict[str, str], cwd: Path, exe: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if ok:
        assert r.returncode == 0, f"edgedp {' '.join(args)}: {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "EDGEDP_ROOT", "EDGEDP_TARGET", "EDGEDP_CACHE_DIR", "VIRTUAL_ENV")}
    return {**env, "EDGEDP_STATE_DIR": str(tmp / "state"), "EDGEDP_CACHE_DIR": str(tmp / "cache"), **extra}


def test_make_firmware_model_is_the_image_that_runs(user_dir: Path, tmp_path: Path) -> None:
    """`make ... MODEL=mine.c` in a checkout, then `info` and `query --infer`: the image with that model
    runs and is not rebuilt with the default; a width the model does not take is refused on the host."""
    tree = tmp_path / "checkout"  # a copy of the checkout, so the shared build/ is left alone
    (tree / TEST_KEY).parent.mkdir(parents=True)
    subprocess.run(["cp", "-r", str(ROOT / "Makefile"), str(ROOT / "firmware"), str(tree)], check=True)
    subprocess.run(["cp", str(ROOT / TEST_KEY), str(tree / TEST_KEY)], check=True)
    env = clean_env(tmp_path, PYTHONPATH=str(ROOT / "host"), EDGEDP_ROOT=str(tree))
    exe = str(Path(sys.executable).with_name("edgedp"))
    run(env, user_dir, exe, "deploy", "mine.joblib", "--input-range", "-5", "5", "--out", str(user_dir / "mine.c"))
    r = subprocess.run(["make", "-C", str(tree), "build/qemu/edgedp.elf", f"MODEL={user_dir / 'mine.c'}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    elf = tree / "build" / "qemu" / "edgedp.elf"
    built = elf.stat().st_mtime_ns
    info = json.loads(run(env, user_dir, exe, "info", "-t", "qemu", "--json").stdout)
    assert info["model"]["name"] == "mine"
    assert (info["model"]["n_features"], info["model"]["n_classes"], info["model"]["head"]) == (20, 4, "softmax")
    r = run(env, user_dir, exe, "query", "-t", "qemu", "--infer", "-m", "label", "--json", "x20.npy")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["status"] for x in rows] == ["ok"] * 3 and all(0 <= x["output"]["label"] < 4 for x in rows)
    r = run(env, user_dir, exe, "query", "-t", "qemu", "--infer", "x64.npy", ok=False)
    assert r.returncode != 0 and "64 values" in r.stderr and "takes 20 inputs" in r.stderr
    assert "row" not in r.stdout  # refused before any row
    assert elf.stat().st_mtime_ns == built  # never rebuilt with another model


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The wheel built from this checkout, installed (no deps) in a fresh venv outside it; the
    dependencies come from the test venv through a .pth line (its own .pth files, such as this
    checkout's editable install, are not processed from there)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = clean_env(tmp)  # no PYTHONPATH: pip would take this checkout's package as installed
    src = tmp / "src"  # pip builds in the source tree: a copy keeps build/ and egg-info out of the checkout
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("build", ".venv", ".git", ".pio", "*.egg-info",
                                                              "__pycache__", ".pytest_cache"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, cwd=tmp, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    wheel = next((tmp / "dist").glob("edgedp-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                        str(wheel)], capture_output=True, text=True, cwd=tmp, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=env).stdout.strip()
    assert (Path(site) / "edgedp" / "_firmware" / "Makefile").is_file()
    (Path(site) / "zz_test_deps.pth").write_text(SHARED_SITE + "\n")
    return str(venv / "bin" / "edgedp"), tmp


def test_installed_wheel_runs_the_users_model(installed: tuple[str, Path], user_dir: Path) -> None:
    """info, query, verify, deploy + build + query --infer from the installed wheel: images are built
    in the user cache directory from the packaged firmware sources, with the packaged test key."""
    exe, tmp = installed
    env = clean_env(tmp)
    where = subprocess.run([str(Path(exe).with_name("python")), "-c", "import edgedp; print(edgedp.__file__)"],
                           env=env, cwd=user_dir, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tmp / "venv"))
    info = json.loads(run(env, user_dir, exe, "info", "-t", "qemu", "--json").stdout)
    assert info["build"] == "test" and info["model"]["name"] == "digits-ensemble"
    cached = list((tmp / "cache").glob("firmware-*/build/qemu/edgedp.elf"))
    assert len(cached) == 1
    r = run(env, user_dir, exe, "query", "-t", "qemu", "--json", "probs.npy")
    assert [json.loads(line)["status"] for line in r.stdout.splitlines()] == ["ok", "ok"]
    v = json.loads(run(env, user_dir, exe, "verify", "-t", "qemu", "-n", "20", "--samples", "1000", "--json",
                       "--no-progress").stdout)
    assert v["ok"] is True, v
    run(env, user_dir, exe, "deploy", "mine.joblib", "--input-range", "-5", "5", "--out", "mine_wheel.c")
    b = json.loads(run(env, user_dir, exe, "build", "--model", "mine_wheel.c", "-t", "qemu", "--json").stdout)
    assert b["checkout"] is False and b["model"]["name"] == "mine"
    r = run(env, user_dir, exe, "query", "-t", "qemu", "--infer", "-m", "label", "--json", "x20.npy")
    assert [json.loads(line)["status"] for line in r.stdout.splitlines()] == ["ok"] * 3
    info = json.loads(run(env, user_dir, exe, "info", "-t", "qemu", "--json").stdout)
    assert info["model"]["name"] == "mine" and info["model"]["n_features"] == N_FEATURES
