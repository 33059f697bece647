"""What tests share besides fixtures (those are in conftest.py): where things are, the `edgedp`
command run as a user runs it, and the shape of its one-line errors.

``run_cli`` runs the installed command in a child process (the console script of the Python
that runs pytest, so a throwaway venv tests its own install); for the command in-process use
``click.testing.CliRunner().invoke(edgedp.cli.main, [...])``. ``one_line_error`` takes the
result of either."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sysconfig
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import pytest

from edgedp import paths

ROOT = Path(__file__).resolve().parents[1]
EDGEDP = Path(sysconfig.get_path("scripts")) / "edgedp"
"""The installed `edgedp` command, next to the Python running the tests."""
KEY = str(paths.test_key_path())
"""tests/keys/test-device.key: the public HMAC key built into test images."""
EXTRA = {"unicorn": "bench", "capstone": "bench", "elftools": "bench", "mpmath": "bench", "matplotlib": "bench",
         "sklearn": "analysis", "joblib": "analysis", "threadpoolctl": "analysis", "dp_accounting": "analysis",
         "jax": "train", "optax": "train", "dask": "dist", "distributed": "dist", "emlearn": "peers",
         "robot": "robot", "cryptography": "test", "platformio": "test", "tflite": "import",
         "ai_edge_litert": "import", "starlette": "dashboard",
         "uvicorn": "dashboard", "plotly": "dashboard", "selenium": "test"}
"""The extra of pyproject.toml that installs each optional module the tests import."""
TEST_EPOCH = 1767225600  # 2026-01-01T00:00:00Z, the qemu port's boot clock
DAY = 86400


def require(module: str, *more: str) -> ModuleType:
    """Skip unless every module imports, and return the last one. Called at a test module's top
    (before its imports of them) it skips the whole module, in a conftest.py the folder, in a
    fixture or test that test, so collection with the base install (``pip install -e .``) never
    errors; the reason names the extra to install (EXTRA). (Hidden from tracebacks, so a skip
    is reported at the require call.)"""
    __tracebackhide__ = True
    for m in (module, *more):  # (a loop, not a comprehension: that would be a frame of its own)
        last = pytest.importorskip(m, reason=f"{m} is not installed (pip install -e '.[{EXTRA[m.split('.')[0]]}]')")
    return last


def cli_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The environment of a child `edgedp`: the test's own (conftest.py points EDGEDP_STATE_DIR
    at an empty folder and EDGEDP_CONFIG at /dev/null) without EDGEDP_TARGET, so a developer's
    default target never stands in for the one a test names; then ``env``, where None unsets
    a variable (``{"EDGEDP_CONFIG": None}``: the command looks for edgedp.toml itself)."""
    e = {k: v for k, v in os.environ.items() if k != "EDGEDP_TARGET"}
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def run_cli(*args: str, stdin: str | None = None, cwd: Path | None = None,
            env: Mapping[str, str | None] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`edgedp ARGS...` in a child process (environment: ``cli_env(env)``), its output captured
    as text; never raises on a non-zero exit (the test asserts the code it expects)."""
    return subprocess.run([str(EDGEDP), *args], capture_output=True, text=True, input=stdin, cwd=cwd,
                          env=cli_env(env), timeout=timeout)


def start_cli(*args: str, env: Mapping[str, str | None] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`edgedp ARGS...` started in a child process (environment: ``cli_env(env)``), stdout and
    stderr piped as text, for a test that signals it, feeds it or reads it while it runs;
    ``popen``: more subprocess.Popen arguments (``stdin=subprocess.PIPE``, ``process_group=0``...)."""
    return subprocess.Popen([str(EDGEDP), *args], text=True, env=cli_env(env),
                            **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen})


def signal_taken(p: subprocess.Popen[str], timeout: float = 60) -> None:
    """Wait until the child has taken the signals sent to it: none is pending any more
    (/proc/PID/status SigPnd and ShdPnd) and it sleeps again (state S), or it has exited. The
    `edgedp` command is single-threaded, so it sleeps again only once its Python handler has run:
    a test can then send the next signal, or release an answer, knowing that this one was seen
    first (where a fixed sleep only guessed). ``timeout`` is a liveness bound, not a measurement."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = Path(f"/proc/{p.pid}/status").read_text()
        except FileNotFoundError:  # reaped
            return
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
        state = fields["State"].split()[0]
        if state == "Z" or (state == "S" and not pending):
            return
        assert time.monotonic() < deadline, f"pid {p.pid} has not taken its signal in {timeout} s ({fields['State']})"
        time.sleep(0.01)


class _Outcome(Protocol):
    @property
    def stderr(self) -> str: ...


def exit_code(r: subprocess.CompletedProcess[str] | _Outcome) -> int:
    """The exit code of a child process (returncode) or of a CliRunner result (exit_code)."""
    code = r.returncode if isinstance(r, subprocess.CompletedProcess) else getattr(r, "exit_code")
    assert isinstance(code, int), code
    return code


def one_line_error(r: subprocess.CompletedProcess[str] | _Outcome, reason: str) -> None:
    """The command failed with exactly one line on stderr, ``edgedp: error: ...`` naming
    ``reason``, and no traceback anywhere."""
    out = r.stdout if isinstance(r, subprocess.CompletedProcess) else getattr(r, "output")
    assert exit_code(r) != 0, out
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("edgedp: error:"), r.stderr
    assert reason in r.stderr, r.stderr
    assert "Traceback" not in out and "Traceback" not in r.stderr


def make(*targets: str) -> None:
    """Build targets, one make at a time per target list: two pytest-xdist workers can ask for the
    same image (test_qemu_infer_raw.py and test_qemu_infer_release.py)."""
    lock = ROOT / "build" / (".make-" + "+".join(t.replace("/", "_") for t in targets) + ".lock")
    lock.parent.mkdir(exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        r = subprocess.run(["make", "-C", str(ROOT), *targets], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def overflow_model_source(tmp_path: Path) -> Path:
    """build/gen/models/overflow.c, written by `edgedp deploy`: a softmax logistic regression on
    64 inputs clamped to [0, 1] whose weights of 3e38 overflow a logit to Inf from two pixels at 1
    (the softmax then gives NaN), for the images built from build/gen/models (Makefile)."""
    joblib = pytest.importorskip("joblib", reason="the demo extra (pip install -e '.[demo]')")
    linear_model = pytest.importorskip("sklearn.linear_model", reason="the demo extra (pip install -e '.[demo]')")
    from click.testing import CliRunner

    from edgedp.cli import main
    X = np.random.default_rng(0).random((40, 64))
    m = linear_model.LogisticRegression(max_iter=200).fit(X, np.arange(40) % 10)
    m.coef_ = np.full_like(m.coef_, 3e38)
    joblib.dump(m, tmp_path / "overflow.joblib")
    out = ROOT / "build/gen/models/overflow.c"
    r = CliRunner().invoke(main, ["deploy", str(tmp_path / "overflow.joblib"), "--out", str(out),
                                  "--input-range", "0", "1"])
    assert r.exit_code == 0, r.output
    assert "inputs clamped to [0, 1] (given)" in r.output
    return out


POSTGRES_BIN = "/usr/lib/postgresql"
"""Where Debian's postgresql package puts each version's initdb and pg_ctl (`make setup` installs it)."""


def postgres_bin() -> Path | None:
    """The bin folder of the newest PostgreSQL under /usr/lib/postgresql/<version>/bin, None without one."""
    found = sorted((p for p in Path(POSTGRES_BIN).glob("*/bin") if (p / "initdb").is_file() and (p / "pg_ctl").is_file()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return found[-1] if found else None


class Postgres:
    """A PostgreSQL server of its own in a temporary folder, on a free loopback port, trusting
    local connections as user ``postgres``: ``url(db)`` names a database on it, ``create(db)``
    makes one. Run as an unprivileged user (initdb refuses root: as root the server runs as
    ``nobody`` through runuser)."""

    def __init__(self, bin_dir: Path):
        import socket
        import tempfile
        self.bin = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="edgedp-pg-"))
        self.base.chmod(0o755)
        self.data = self.base / "data"
        self.data.mkdir(mode=0o700)
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd
            nobody = pwd.getpwnam("nobody")
            os.chown(self.data, nobody.pw_uid, nobody.pw_gid)
            self.as_user = ["runuser", "-u", "nobody", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.data / "server.log"), "-o",
                  f"-h 127.0.0.1 -p {self.port} -k {self.data} -F", "start")

    def _run(self, tool: str, *args: str) -> None:
        r = subprocess.run([*self.as_user, str(self.bin / tool), *args], capture_output=True, text=True,
                           cwd=self.base, timeout=120)
        assert r.returncode == 0, f"{tool} failed: {r.stdout[-2000:]}{r.stderr[-2000:]}"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{db}"

    def create(self, db: str) -> str:
        """A new empty database; its SQLAlchemy URL."""
        import sqlalchemy as sa
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{db}"'))
        engine.dispose()
        return self.url(db)

    def stop(self) -> None:
        import shutil
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def postgres() -> Postgres:
    """A started Postgres (stop it when done); skips with the reason when Debian's postgresql
    package is not installed (`make setup` installs it, so CI runs these tests)."""
    __tracebackhide__ = True
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip(f"no PostgreSQL server: no {POSTGRES_BIN}/<version>/bin/initdb (make setup installs "
                    "Debian's postgresql package)")
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e .)")
    return Postgres(bin_dir)
