"""The README's streaming example runs as written, against the native build."""
from __future__ import annotations

import re

import pytest

from ..helpers import ROOT

pytestmark = pytest.mark.native


def test_readme_streaming_example(native_builds: None, monkeypatch, capsys) -> None:
    text = (ROOT / "README.md").read_text()
    code = re.search(r"<!-- streaming example[^>]*-->\n```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.setenv("EDGEDP_TARGET", "posix")  # a fresh native device: budget 0 spent
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    lines = capsys.readouterr().out.splitlines()
    answers = [ln for ln in lines if ln.startswith("top-3")]
    assert len(answers) == 5 and answers[-1].endswith("0 left today")
    # Rows already on the wire when the budget ran out come back refused too; none is sent after.
    refused = lines[5:-1]
    assert refused and all(ln == "refused: ERR_BUDGET" for ln in refused) and len(refused) <= 3
    assert lines[-1] == "spent today: 5.0"
