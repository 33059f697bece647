"""audit-config flags each listed configuration error on a bad config, with its computed
consequence, and passes a good one; exit status 0 (all pass), 1 (a failure, or a configuration
it cannot judge), 3 (warnings only)."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from .. import helpers

helpers.require("jax", "optax")  # edgedp.train: DP-SGD

from edgedp.cli import main
from edgedp.train import accountant, config_check

GOOD = {"epsilon": 1.0, "delta": 1e-5, "n": 1198, "clip_norm": 1.0, "noise_multiplier": 7.5,
        "sampling_rate": 0.25, "epochs": 15, "sampling": "poisson", "clipping": "per-example",
        "accountant": "pld", "noise_sampler": "discrete"}


def checks(cfg: dict) -> dict[str, config_check.Check]:
    return {c.name: c for c in config_check.audit(config_check.TrainingConfig.from_mapping(cfg))}


def test_good_config_passes_every_check(tmp_path) -> None:
    f = tmp_path / "good.toml"
    f.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in GOOD.items()) + "\n")
    r = CliRunner().invoke(main, ["audit-config", str(f), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["passed"] and not d["failed"]
    assert {c["name"] for c in d["checks"]} == set(config_check.CHECKS)
    canary = next(c for c in d["checks"] if c["name"] == "clipping")["values"]["canary"]
    assert canary["bounded"] and canary["influence"] <= 1.0 + 1e-4


def test_single_release_calibration_is_flagged_with_the_composed_epsilon() -> None:
    nm = config_check.single_release_multiplier(1.0, 1e-5)
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
    for name in ("delta", "rdp_order", "sampling", "clipping"):
        assert c[name].status == "fail", name
    assert c["noise_sampler"].status == "warn"
    r = c["rdp_order"].values
    assert r["epsilon_at_orders"] >= r["epsilon_full_grid"] > 1      # the orders do not give ε = 1
    s = c["sampling"].values
    assert s["epsilon_without_amplification"] > 2 * s["epsilon_as_poisson"]
    assert c["clipping"].values["epsilon_per_batch"] > 100


def test_cli_bad_config_fails_each_check_with_canary(tmp_path) -> None:
    bad = {**GOOD, "delta": 1e-3, "noise_multiplier": config_check.single_release_multiplier(1.0, 1e-3),
           "clip_norm": 4.0, "sensitivity": 1.0, "accountant": "rdp", "rdp_order": 32,
           "sampling": "shuffle", "clipping": "per-batch", "noise_sampler": "float",
           "preprocessing_fit": "private", "hyperparameter_trials": 5}
    bad["noise_std"] = bad["noise_multiplier"]
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    r = CliRunner().invoke(main, ["audit-config", str(f), "--json"])
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    warn_only = {"noise_sampler"}
    assert set(d["failed"]) == set(config_check.CHECKS) - warn_only - {"noise"} and set(d["warnings"]) == warn_only
    canary = next(c for c in d["checks"] if c["name"] == "clipping")["values"]["canary"]
    assert not canary["bounded"] and canary["bound_ratio"] > 10


def test_flags_and_bad_input() -> None:
    r = CliRunner().invoke(main, ["audit-config", "--epsilon", "1", "--delta", "1e-5", "--n", "1000",
                                  "--clip-norm", "1", "--noise-multiplier", "8", "--sampling-rate", "0.25",
                                  "--epochs", "15", "--noise-sampler", "discrete", "--no-canary", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["passed"]
    r = CliRunner().invoke(main, ["audit-config", "--epsilon", "1", "--json"])
    assert r.exit_code != 0 and "error" in json.loads(r.stdout)
    with pytest.raises(ValueError, match="unknown configuration keys"):
        config_check.TrainingConfig.from_mapping({**GOOD, "sigma": 1.0})
    for bad, msg in (({"n_params": "x"}, "n_params must be a whole number"), ({"rdp_orders": "2,4"}, "rdp_orders"),
                     ({"sampling": "bootstrap"}, "sampling must be one of"), ({"hyperparameter_trials": 0}, ">= 1"),
                     ({"noise": "uniform"}, "noise must be one of"), ({"epsilon": "1"}, "epsilon must be a number")):
        with pytest.raises(ValueError, match=msg):
            config_check.TrainingConfig.from_mapping({**GOOD, **bad})
    r = CliRunner().invoke(main, ["audit-config", "--epsilon", "1", "--delta", "1e-5", "--n", "1000", "--clip-norm",
                                  "1", "--noise-multiplier", "8", "--sampling-rate", "0.25", "--epochs", "15",
                                  "--rdp-orders", "2,x", "--json"])
    assert r.exit_code == 4 and "--rdp-orders" in json.loads(r.stdout)["message"]


NM1 = accountant.calibrate(1.0, 0.25, 60, 1e-5)      # the trainer's default run: ε = 1 at q = 0.25, 60 steps
BASE = ["audit-config", "--epsilon", "1", "--delta", "1e-5", "--n", "1198", "--clip-norm", "1",
        "--noise-multiplier", repr(NM1), "--epochs", "15", "--noise-sampler", "discrete", "--no-canary", "--json"]


def run_cli(*extra: str) -> tuple[int, dict]:
    r = CliRunner().invoke(main, [*BASE, *extra])
    return r.exit_code, json.loads(r.stdout)


def check_of(doc: dict, name: str) -> dict:
    return next(c for c in doc["checks"] if c["name"] == name)


def test_fixed_batch_declared_poisson_fails_with_the_without_replacement_epsilon() -> None:
    code, d = run_cli("--batch-size", "300", "--sampling", "poisson")
    assert code == 1 and {"sampling", "epsilon"} <= set(d["failed"])
    s = check_of(d, "sampling")
    assert "inconsistent" in s["consequence"]
    assert s["values"]["epsilon_without_replacement"] == pytest.approx(2.36, abs=0.01)
    assert s["values"]["epsilon_without_replacement"] == pytest.approx(
        accountant.without_replacement_epsilon(NM1, 1198, 300, 60, 1e-5))
    assert check_of(d, "epsilon")["values"]["epsilon_true"] == pytest.approx(2.36, abs=0.01)
    # declared as what it is, it is accounted as such: still more than ε = 1
    code, d = run_cli("--batch-size", "300", "--sampling", "without_replacement")
    assert code == 1 and d["failed"] == ["epsilon", "sampling"]
    assert check_of(d, "epsilon")["values"]["relation"] == "replace-one"


def test_laplace_noise_fails_with_its_epsilon() -> None:
    code, d = run_cli("--sampling-rate", "0.25", "--noise", "laplace", "--n-params", "650")
    assert code == 1 and {"noise", "epsilon"} <= set(d["failed"])
    v = check_of(d, "noise")["values"]
    assert v["epsilon_laplace"] == pytest.approx(48.0, abs=0.5)
    assert v["epsilon_laplace"] == pytest.approx(accountant.laplace_epsilon(NM1 / math.sqrt(650), 0.25, 60, 1e-5))
    code, d = run_cli("--sampling-rate", "0.25", "--noise", "laplace")
    assert code == 1 and "noise" in d["failed"] and "n_params" in check_of(d, "noise")["consequence"]


def test_private_preprocessing_fails_and_public_passes() -> None:
    code, d = run_cli("--sampling-rate", "0.25", "--preprocessing-fit", "private")
    assert code == 1 and {"preprocessing", "epsilon"} <= set(d["failed"])
    assert check_of(d, "epsilon")["values"]["epsilon_true"] == "inf"
    assert run_cli("--sampling-rate", "0.25", "--preprocessing-fit", "public")[0] == 0
    code, d = run_cli("--sampling-rate", "0.25", "--preprocessing-fit", "private_dp")
    assert code == 3 and d["warnings"] == ["preprocessing"]


def test_narrow_rdp_orders() -> None:
    # the claim rests on RDP at orders that do not give it, and the full accounting does not either
    code, d = run_cli("--sampling-rate", "0.25", "--accountant", "rdp", "--rdp-orders", "2,3,4")
    assert code == 1 and {"rdp_order", "epsilon"} <= set(d["failed"])
    v = check_of(d, "rdp_order")["values"]
    assert v["epsilon_at_orders"] == pytest.approx(accountant.rdp_epsilon_at_orders(NM1, 0.25, 60, 1e-5, (2, 3, 4)))
    assert v["epsilon_at_orders"] > 3 > 1 and v["epsilon_full_grid"] < v["epsilon_at_orders"]
    # the same orders with PLD accounting: the claim holds, the derivation does not: a warning
    code, d = run_cli("--sampling-rate", "0.25", "--rdp-orders", "2,3,4")
    assert code == 3 and d["warnings"] == ["rdp_order"]


def test_shuffle_is_accounted_by_the_replace_one_bound() -> None:
    code, d = run_cli("--sampling-rate", "0.25", "--sampling", "shuffle")
    assert code == 1 and "sampling" in d["failed"]
    e = check_of(d, "sampling")["values"]["epsilon_without_amplification"]
    assert e == pytest.approx(accountant.gaussian_epsilon(NM1 / 2, 15, 1e-5)) and e == pytest.approx(4.60, abs=0.01)


def test_warnings_only_exit_3() -> None:
    code, d = run_cli("--sampling-rate", "0.25", "--delta", "1e-4")
    assert code == 3 and d["warnings"] == ["delta"] and not d["failed"] and d["exit_code"] == 3
    code, d = run_cli("--sampling-rate", "0.25", "--noise-sampler", "float")
    assert code == 3 and d["warnings"] == ["noise_sampler"]
    assert run_cli("--sampling-rate", "0.25")[0] == 0


def test_a_search_the_claim_does_not_cover_fails() -> None:
    # ε claimed for one run, ten runs composed: a claim the configuration does not support fails
    code, d = run_cli("--sampling-rate", "0.25", "--hyperparameter-trials", "10")
    assert code == 1 and d["failed"] == ["hyperparameters"] and not d["passed"]
    e = check_of(d, "hyperparameters")["values"]["epsilon_all_trials"]
    assert e == pytest.approx(accountant.epsilon(NM1, 0.25, 600, 1e-5), rel=1e-3) and e > 1


@pytest.mark.parametrize("line, key", [('preprocessing = "none"', "preprocessing"),
                                       ('noise_sampler = "laplace"', "noise_sampler"),
                                       ('epochs = "15"', "epochs")])
def test_a_config_it_cannot_judge_fails_closed_naming_the_key(tmp_path, line, key) -> None:
    f = tmp_path / "dpsgd.toml"
    f.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in GOOD.items() if k != key)
                 + f"\n{line}\n")
    r = helpers.run_cli("audit-config", str(f), "--no-canary", "--json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert not d["passed"] and d["failed"] == ["config"] and key in d["error"]
    r = helpers.run_cli("audit-config", str(f), "--no-canary")
    assert r.returncode == 1 and r.stdout.startswith("FAIL  config") and key in r.stdout


def test_the_trainers_own_manifest_audits_with_warnings_only(tmp_path) -> None:
    """The configuration `edgedp train` runs (read from its manifest) is never a failure; the canary
    uses the configured batch size."""
    out = tmp_path / "m.npz"
    r = CliRunner().invoke(main, ["train", "--noise-multiplier", "2", "--epochs", "1", "--out", str(out),
                                  "--no-progress", "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["audit-config", str(tmp_path / "m.manifest.json"), "--json"])
    d = json.loads(r.stdout)
    assert r.exit_code == 3 and d["warnings"] == ["noise_sampler"] and not d["failed"], r.output
    canary = check_of(d, "clipping")["values"]["canary"]
    assert canary["batch"] == round(0.25 * 1198) and canary["bounded"]
