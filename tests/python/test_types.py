"""The host package passes mypy with the project's configuration (pyproject.toml, [tool.mypy]):
every module of host/edgedp is checked, and none has a type error."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_host_package_passes_mypy() -> None:
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"mypy found type errors (run `.venv/bin/mypy` from the checkout):\n{out}"
    checked = re.search(r"no issues found in (\d+) source files?", out)
    assert checked, out
    modules = sum(1 for _ in (ROOT / "host" / "edgedp").rglob("*.py"))
    assert int(checked.group(1)) == modules, f"mypy checked {checked.group(1)} files of {modules}:\n{out}"
