"""Importing emlearn (the bench's peer) runs numpy.seterr(all='raise') for the whole process, which
made every later float underflow in the same pytest worker an exception; edgedp.bench.peers
imports it without that side effect."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

# find_spec, not importorskip: importing emlearn here would set the side effect in this process
pytestmark = pytest.mark.skipif(importlib.util.find_spec("emlearn") is None,
                                reason="emlearn is not installed (the [peers] extra)")

CHECK = """
import numpy as np
before = np.geterr()
{body}
print(np.geterr() == before)
"""


def run(body: str) -> str:
    r = subprocess.run([sys.executable, "-c", CHECK.format(body=body)], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def test_emlearn_itself_changes_numpy_error_handling() -> None:
    assert run("import emlearn") == "False"      # the side effect the wrapper undoes


def test_the_bench_imports_emlearn_without_changing_it() -> None:
    assert run("from edgedp.bench import peers\npeers.emlearn_include()\npeers._import_emlearn('emlearn.net')") == "True"
