"""Bad numbers and long runs of the analysis and training commands, through the real CLI."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgedp.cli import main


def json_error(r: subprocess.CompletedProcess, code: int, name: str, reason: str) -> None:
    assert r.returncode == code, r.stdout + r.stderr
    err = json.loads(r.stdout.splitlines()[-1])
    assert err["error"] == name and err["exit_code"] == code and reason in err["message"], err
    assert r.stderr.splitlines()[-1].startswith("edgedp: error:") and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("args,reason", [
    (["train", "--lr", "nan"], "the learning rate must be finite, not nan"),
    (["train", "--clip-norm", "0"], "the clip norm must be > 0"),
    (["train", "--sampling-rate", "1.5"], "the sampling rate must be at most 1"),
])
def test_train_refuses_garbage_numbers(args: list[str], reason: str) -> None:
    r = CliRunner().invoke(main, [*args, "--json"])
    json_error(subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr), 2, "ERR_USAGE", reason)


def test_audit_config_names_a_value_of_the_wrong_type(tmp_path: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text('epsilon = "one"\ndelta = 1e-5\nn = 1000\nclip_norm = 1.0\nnoise_multiplier = 1.1\n'
                   'sampling_rate = 0.01\nepochs = 10\n')
    r = CliRunner().invoke(main, ["audit-config", str(cfg), "--no-canary", "--json"])
    # a configuration audit-config cannot judge fails closed (exit 1), naming the key (issue 39.14)
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert not d["passed"] and d["failed"] == ["config"] and "epsilon must be a number, got 'one'" in d["error"]


@pytest.mark.parametrize("command", [["attack", "mia"], ["report", "--out", "/tmp/edgedp-unused-report"]])
def test_long_commands_say_how_long_and_suggest_quick(command: list[str]) -> None:
    # a missing data file ends the command right after the announcement, before any training
    r = CliRunner().invoke(main, [*command, "--data", "/nonexistent.npz", "--jobs", "2"])
    assert r.exit_code == 4, r.output
    assert re.search(r"these settings take roughly \d+ (s|min) with --jobs 2", r.stderr), r.stderr
    assert re.search(r"--quick runs the same pipeline on small settings in roughly \d+ s", r.stderr)
    q = CliRunner().invoke(main, [*command, "--data", "/nonexistent.npz", "--quick"])
    assert q.exit_code == 4 and "roughly" not in q.stderr
    assert "roughly" not in CliRunner().invoke(main, ["-q", *command, "--data", "/nonexistent.npz"]).stderr
