"""The README's commands are true (issue 20.10): the sample inputs they name ship in examples/,
every option they use exists on that command, `--json` is on every command but demo, and the
session example's daily cap covers the rows it queries."""
from __future__ import annotations

import re
import shlex

import numpy as np
from click.testing import CliRunner

from edgedp.cli import COMMANDS, main

from ..helpers import ROOT

README = (ROOT / "README.md").read_text()
GROUPS = ("admin", "device", "attack", "fleet")


def sh_lines() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    return [ln.split("#", 1)[0].strip() for b in blocks for ln in b.splitlines()
            if ln.strip().startswith(".venv/bin/edgedp")]


def help_text(*words: str) -> str:
    r = CliRunner().invoke(main, [*words, "--help"])
    assert r.exit_code == 0, (words, r.output)
    return r.output


def test_sample_inputs_ship_in_examples() -> None:
    named = set(re.findall(r"examples/[\w.\-]+", README))
    assert {"examples/probs.npy", "examples/images.npy", "examples/audit-config.toml"} <= named
    for rel in named:
        assert (ROOT / rel).is_file(), rel
    assert np.load(ROOT / "examples/images.npy").shape[1] == 64


def test_every_option_the_readme_uses_exists() -> None:
    for line in sh_lines():
        words = shlex.split(line.replace("< ", "").replace("$K", "K"))[1:]
        cmd = words[:2] if words[0] in GROUPS else words[:1]
        text = help_text(*cmd)
        for opt in (w for w in words if w.startswith("--")):
            assert re.search(rf"(?<![\w-]){re.escape(opt)}\b", text), f"{line}: {' '.join(cmd)} has no {opt}"


def test_json_on_every_command_but_demo() -> None:
    for name in COMMANDS:
        if name in ("demo", *GROUPS):
            assert name != "demo" or "--json" not in help_text(name)
            continue
        assert "--json" in help_text(name), name


def test_session_example_cap_covers_its_rows() -> None:
    block = README[README.index("edgedp device start"):]
    cap = float(re.search(r"--daily-cap (\d+)", block).group(1))
    eps = float(re.search(r"--epsilon ([\d.]+)", block).group(1))
    rows = len(np.load(ROOT / re.search(r"query (examples/\S+)", block).group(1)))
    assert rows * eps <= cap


def test_progress_sentence_names_commands_with_no_progress() -> None:
    sentence = re.search(r"The commands that show progress bars \((.*?)\)", README, re.S).group(1)
    named = re.findall(r"`(\w[\w-]*)`", sentence)
    assert named and "query" not in named
    for name in named:
        assert "--no-progress" in help_text(name), name
    for name in ("tradeoff", "report", "account"):
        assert "--no-progress" in help_text(name) or name == "account"
