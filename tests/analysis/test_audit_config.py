"""audit-config flags each listed configuration error on a bad config, with its computed
consequence, and passes a good one."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from edgedp.cli import main
from edgedp.train import accountant, audit

GOOD = {"epsilon": 1.0, "delta": 1e-5, "n": 1198, "clip_norm": 1.0, "noise_multiplier": 7.5,
        "sampling_rate": 0.25, "epochs": 15, "sampling": "poisson", "clipping": "per-example",
        "accountant": "pld", "noise_sampler": "discrete"}


def checks(cfg: dict) -> dict[str, audit.Check]:
    return {c.name: c for c in audit.audit(audit.TrainingConfig.from_mapping(cfg))}


def test_good_config_passes_every_check(tmp_path) -> None:
    f = tmp_path / "good.toml"
    f.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in GOOD.items()) + "\n")
    r = CliRunner().invoke(main, ["audit-config", str(f), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["passed"] and not d["failed"]
    assert {c["name"] for c in d["checks"]} == set(audit.CHECKS)
    canary = next(c for c in d["checks"] if c["name"] == "clipping")["values"]["canary"]
    assert canary["bounded"] and canary["influence"] <= 1.0 + 1e-4


def test_single_release_calibration_is_flagged_with_the_composed_epsilon() -> None:
    nm = audit.single_release_multiplier(1.0, 1e-5)
    c = checks({**GOOD, "noise_multiplier": nm})
    assert not c["single_release"].passed
    composed = accountant.epsilon(nm, 0.25, 60, 1e-5)
    assert c["single_release"].values["epsilon_composed"] == pytest.approx(composed)
    assert composed > 1.0 and not c["epsilon"].passed


def test_sigma_entered_as_multiplier_and_wrong_sensitivity() -> None:
    c = checks({**GOOD, "clip_norm": 4.0, "noise_std": 7.5})
    assert not c["noise_vs_sigma"].passed
    assert c["noise_vs_sigma"].values["real_multiplier"] == pytest.approx(7.5 / 4.0)
    assert c["noise_vs_sigma"].values["epsilon_real"] > 3 * c["noise_vs_sigma"].values["epsilon_stated"]
    s = checks({**GOOD, "clip_norm": 2.0, "sensitivity": 1.0})
    assert not s["sensitivity"].passed
    assert s["sensitivity"].values["real_multiplier"] == pytest.approx(7.5 / 2.0)
    assert not s["epsilon"].passed


def test_large_delta_fixed_rdp_order_shuffle_per_batch_float() -> None:
    c = checks({**GOOD, "delta": 1e-3, "accountant": "rdp", "rdp_order": 4, "sampling": "shuffle",
                "clipping": "per-batch", "noise_sampler": "float"})
    for name in ("delta", "rdp_order", "sampling", "clipping", "noise_sampler"):
        assert not c[name].passed, name
    r = c["rdp_order"].values
    assert r["epsilon_fixed_order"] > r["epsilon_optimal"]          # a fixed order overstates here
    s = c["sampling"].values
    assert s["epsilon_without_amplification"] > 2 * s["epsilon_as_poisson"]
    assert c["clipping"].values["epsilon_per_batch"] > 100


def test_cli_bad_config_fails_each_check_with_canary(tmp_path) -> None:
    bad = {**GOOD, "delta": 1e-3, "noise_multiplier": audit.single_release_multiplier(1.0, 1e-3),
           "clip_norm": 4.0, "sensitivity": 1.0, "accountant": "rdp", "rdp_order": 32,
           "sampling": "shuffle", "clipping": "per-batch", "noise_sampler": "float"}
    bad["noise_std"] = bad["noise_multiplier"]
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    r = CliRunner().invoke(main, ["audit-config", str(f), "--json"])
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert set(d["failed"]) == set(audit.CHECKS)
    canary = next(c for c in d["checks"] if c["name"] == "clipping")["values"]["canary"]
    assert not canary["bounded"] and canary["bound_ratio"] > 10


def test_flags_and_bad_input() -> None:
    r = CliRunner().invoke(main, ["audit-config", "--epsilon", "1", "--delta", "1e-5", "--n", "1000",
                                  "--clip-norm", "1", "--noise-multiplier", "8", "--batch-size", "250",
                                  "--epochs", "15", "--noise-sampler", "discrete", "--no-canary", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["passed"]
    r = CliRunner().invoke(main, ["audit-config", "--epsilon", "1", "--json"])
    assert r.exit_code != 0 and "error" in json.loads(r.stdout)
    with pytest.raises(ValueError, match="unknown configuration keys"):
        audit.TrainingConfig.from_mapping({**GOOD, "sigma": 1.0})
