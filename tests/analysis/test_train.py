"""DP-SGD training: per-example clipping (canary), Poisson batches, accounting against
dp_accounting, the model file and its manifest, the CLI end to end on a small setting."""
from __future__ import annotations

import json
import math

import dp_accounting
import numpy as np
import pytest
from click.testing import CliRunner

from ..helpers import require

require("jax", "optax")  # edgedp.train: DP-SGD

from edgedp.train import model_file as models_io
from edgedp.cli import main
from edgedp.train import accountant, canary, dpsgd
from edgedp.datasets import digits
from edgedp.train.run import TrainConfig, check_delta


@pytest.fixture(scope="module")
def small():
    d = digits(0)
    return d.X_train[:200], d.y_train[:200]


@pytest.mark.parametrize("hidden", [(), (16,)])
def test_canary_influence_is_bounded_by_c_only_with_per_example_clipping(small, hidden) -> None:
    X, y = small
    for clip in (0.5,):
        per_ex = canary.influence(X, y, 10, clip, "per-example", batch=64, hidden=hidden)
        per_batch = canary.influence(X, y, 10, clip, "per-batch", batch=64, hidden=hidden)
        assert per_ex.bounded and per_ex.influence <= clip * (1 + 1e-4)
        assert per_ex.influence > 0.9 * clip        # the canary's gradient is clipped to C, not dropped
        assert not per_batch.bounded and per_batch.bound_ratio > 10


def test_clipped_sum_bounds_every_row() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(32, 8)).astype(np.float32) * 100
    y = rng.integers(0, 3, 32).astype(np.int32)
    import jax
    params = dpsgd.init_params(8, 3, (4,), jax.random.PRNGKey(0))
    mask = np.ones(32, np.float32)
    for i in range(0, 32, 7):
        m = np.zeros(32, np.float32)
        m[i] = 1.0
        assert dpsgd.tree_norm(dpsgd.clipped_sum(params, X, y, m, np.float32(0.3))) <= 0.3 * (1 + 1e-5)
    assert dpsgd.tree_norm(dpsgd.clipped_sum(params, X, y, mask, np.float32(0.3))) <= 32 * 0.3


def test_poisson_batches_include_each_record_independently() -> None:
    n, q, steps = 400, 0.1, 400
    from edgedp.train import randomness
    counts = np.zeros(n)
    sizes = []
    for idx in dpsgd.poisson_batches(n, q, steps, randomness.OsRandomness()):
        counts[idx] += 1
        sizes.append(len(idx))
    # each record is in Binomial(steps, q) batches; the batch size is Binomial(n, q) and varies
    assert abs(counts.mean() - steps * q) < 1.0
    assert abs(np.var(sizes) - n * q * (1 - q)) < 0.35 * n * q * (1 - q)
    assert len(set(sizes)) > 10
    assert max(sizes) <= dpsgd.block_rows(n, q)


def test_oversize_batch_is_summed_over_blocks_not_truncated(small) -> None:
    """A batch larger than the compiled block must be processed whole (chunked)."""
    X, y = small
    rows = dpsgd.block_rows(len(y), 0.05)
    out = dpsgd.train(X, y, 10, 1.0, 1.0, 3, dpsgd.Hyper(sampling_rate=1.0), 0)   # q = 1: every record
    assert list(out.batch_sizes) == [len(y)] * 3
    assert rows < len(y)


@pytest.mark.parametrize("nm,q,steps", [(1.1, 0.01, 1000), (4.0, 0.25, 60), (0.8, 0.1, 30)])
def test_accounting_agrees_with_dp_accounting(nm: float, q: float, steps: int) -> None:
    d = 1e-5
    ev = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(nm)), steps)
    r = dp_accounting.rdp.RdpAccountant(list(accountant.RDP_ORDERS))
    r.compose(ev)
    p = dp_accounting.pld.PLDAccountant(value_discretization_interval=accountant.PLD_INTERVAL)
    p.compose(ev)
    g = accountant.guarantee(nm, q, steps, d)
    assert g.epsilon_rdp == pytest.approx(r.get_epsilon(d), rel=1e-9)
    assert g.epsilon_pld == pytest.approx(p.get_epsilon(d), rel=1e-9)
    assert g.epsilon_pld <= g.epsilon_rdp * 1.001   # PLD is the tighter of the two upper bounds


def test_calibration_reaches_the_target() -> None:
    nm = accountant.calibrate(2.0, 0.25, 60, 1e-5)
    assert accountant.epsilon(nm, 0.25, 60, 1e-5) <= 2.0
    assert accountant.epsilon(nm * 0.99, 0.25, 60, 1e-5) > 2.0 * 0.995


def test_delta_must_be_below_one_over_n() -> None:
    with pytest.raises(ValueError, match="1/n"):
        check_delta(1e-3, 1000, allow=False)
    with pytest.warns(UserWarning, match="1/n"):
        check_delta(1e-3, 1000, allow=True)
    check_delta(1e-4, 1000, allow=False)
    with pytest.raises(ValueError):
        TrainConfig(target_epsilon=1.0, noise_multiplier=2.0)


def test_model_file_round_trip_and_tamper_detection(tmp_path) -> None:
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(5, 4)).astype(np.float32), np.zeros(4, np.float32)),
              (rng.normal(size=(4, 3)).astype(np.float32), np.ones(3, np.float32))]
    m = models_io.Model("mlp", layers, np.array([3, 5, 7]))
    training = {k: 1 for k in models_io.TRAINING_KEYS}
    training["private"] = True
    path = tmp_path / "m.npz"
    man = models_io.save(path, m, training, {"name": "x", "n_features": 5, "n_classes": 3})
    back, man2 = models_io.load_checked(path)
    assert man2.model_sha256 == man.model_sha256
    X = rng.normal(size=(6, 5))
    assert np.allclose(back.logits(X), m.logits(X))
    assert set(back.predict(X)) <= {3, 5, 7}
    with np.load(path) as f:
        assert str(f["kind"]) == "mlp" and f["W1"].shape == (4, 3) and int(f["n_classes"]) == 3
    raw = bytearray(path.read_bytes())
    raw[-40] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(models_io.ModelFileError, match="does not match"):
        models_io.load_checked(path)


def test_train_cli_end_to_end(tmp_path) -> None:
    base = ["train", "--model", "logreg", "--target-epsilon", "3", "--epochs", "5"]
    r = CliRunner().invoke(main, base + ["--out", str(tmp_path / "private.npz"), "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    for key in ("epsilon", "delta", "noise_multiplier", "clip_norm", "sampling_rate", "steps", "accountant",
                "test_accuracy"):
        assert key in p
    assert p["private"] is True and p["epsilon"] <= 3.0 and p["accountant"] == "pld" and p["steps"] == 20
    assert p["epsilon_pld"] <= p["epsilon_rdp"]
    out = tmp_path / "dp.npz"
    args = base + ["--out", str(out), "--seed", "1", "--json", "--no-progress"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["test_accuracy"] > 0.6 and d["noise_multiplier"] == p["noise_multiplier"]
    model, man = models_io.load_checked(out)
    assert man.training["sampling"] == "poisson" and man.training["noise_multiplier"] == d["noise_multiplier"]
    # a seeded run is reproducible, hence not private: its manifest says why and states no ε anywhere
    assert man.training["private"] is False and man.training["seed"] == 1 and d["private"] is False
    assert "replayable" in man.training["non_private_reason"]
    for k in ("epsilon", "epsilon_add_remove", "epsilon_replace_one"):
        assert man.training[k] == "not private"
    for k in ("epsilon", "epsilon_pld", "epsilon_rdp", "epsilon_replace_one"):
        assert d[k] == "not private"
    r = CliRunner().invoke(main, args[:-2] + ["--no-progress"])
    assert r.exit_code == 0 and r.stdout.startswith("NOT PRIVATE") and "-DP" not in r.stdout, r.output
    r = CliRunner().invoke(main, ["audit-config", str(models_io.manifest_path(out)), "--json"])
    assert r.exit_code == 1 and "not private" in json.loads(r.stdout)["error"]
    assert man.data == {"name": "digits", "n_features": 64, "n_classes": 10, "input_range": [0.0, 1.0]}
    d2 = digits(1)
    assert np.mean(model.predict(d2.X_test) == d2.y_test) == pytest.approx(d["test_accuracy"])
    r2 = CliRunner().invoke(main, args[:-4] + ["--out", str(tmp_path / "again.npz"), "--seed", "1", "--json",
                                               "--no-progress"])
    assert json.loads(r2.stdout)["test_accuracy"] == d["test_accuracy"]          # --seed reproduces
    assert (tmp_path / "again.npz").read_bytes() == out.read_bytes()


def test_train_cli_refuses_large_delta_and_bad_data(tmp_path) -> None:
    r = CliRunner().invoke(main, ["train", "--delta", "0.01", "--out", str(tmp_path / "m.npz"), "--json"])
    assert r.exit_code != 0 and "1/n" in json.loads(r.stdout)["message"]
    bad = tmp_path / "bad.npz"
    np.savez(bad, features=np.zeros((20, 3)))
    r = CliRunner().invoke(main, ["train", "--data", str(bad), "--out", str(tmp_path / "m.npz"), "--json"])
    assert r.exit_code != 0 and "X" in json.loads(r.stdout)["message"]


def test_train_on_users_npz(tmp_path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = np.where(X[:, 0] + X[:, 1] > 0, 7, 2)
    f = tmp_path / "mine.npz"
    np.savez(f, X=X, y=y)
    r = CliRunner().invoke(main, ["train", "--data", str(f), "--model", "mlp", "--hidden", "8",
                                  "--noise-multiplier", "1.0", "--delta", "1e-4", "--epochs", "4",
                                  "--out", str(tmp_path / "m.npz"), "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["test_accuracy"] > 0.8 and math.isfinite(d["epsilon"])
    model, man = models_io.load_checked(tmp_path / "m.npz")
    assert list(model.classes) == [2, 7] and model.kind == "mlp" and len(model.layers) == 2


def _train_json(out, *extra: str) -> dict:
    r = CliRunner().invoke(main, ["train", "--noise-multiplier", "2", "--epochs", "1", "--out", str(out), "--json",
                                  "--no-progress", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_private_runs_draw_from_the_os_and_cannot_be_replayed(tmp_path) -> None:
    """Issue 18.1: two runs with the same arguments give different models; no seed is stored."""
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    da, db = _train_json(a), _train_json(b)
    assert a.read_bytes() != b.read_bytes()
    for d, path in ((da, a), (db, b)):
        _, man = models_io.load_checked(path)
        t = man.training
        assert t["private"] is True and d["private"] is True
        assert "seed" not in t and "seed" not in d and "non_private_reason" not in t
        assert "os.urandom" in t["randomness"]
        # 18.2: the relation and both epsilons; non-private statistics marked, not in the release
        assert "add/remove" in t["neighbouring"] and t["epsilon_add_remove"] == t["epsilon"]
        assert t["epsilon_replace_one"] > t["epsilon"]
        assert "train_accuracy" not in d and "train_accuracy" in d["not_covered"]
        assert "not covered" in d["not_covered"]["what"]
        assert not any("accuracy" in k or "batch_size" in k for k in t)
    # the replace-one epsilon is dp_accounting's REPLACE_ONE PLD of the same event
    acc = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE,
                                          value_discretization_interval=accountant.PLD_INTERVAL)
    acc.compose(accountant.event(2.0, 0.25, 4))
    assert da["epsilon_replace_one"] == pytest.approx(acc.get_epsilon(1e-5))


def test_replace_one_epsilon_of_the_default_run() -> None:
    nm = accountant.calibrate(1.0, 0.25, 60, 1e-5)
    g = accountant.guarantee(nm, 0.25, 60, 1e-5)
    assert g.epsilon_pld <= 1.0 and g.epsilon_replace_one == pytest.approx(2.09, abs=0.01)


def test_noise_and_selection_come_from_the_source() -> None:
    from scipy import stats

    from edgedp.train import randomness
    src = randomness.OsRandomness()
    assert not np.array_equal(src.words(4), src.words(4))
    z = randomness.normal(randomness.SeededRandomness(11), (200_000,))
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01 and stats.kstest(z, "norm").pvalue > 1e-3
    s1, s2 = randomness.SeededRandomness(5), randomness.SeededRandomness(5)
    assert np.array_equal(randomness.normal(s1, (3, 4)), randomness.normal(s2, (3, 4)))
    assert not s1.private and src.private
    # the noisy sum is the float64 sum rounded to the noise lattice, then to float32
    g = [np.linspace(-1, 1, 7, dtype=np.float32)]
    noisy = dpsgd.add_noise(g, 0.5, randomness.SeededRandomness(9))
    step = dpsgd.noise_lattice(0.5)
    assert step == 2.0 ** -17
    z9 = randomness.normal(randomness.SeededRandomness(9), (7,))
    want = (np.round((g[0].astype(np.float64) + 0.5 * z9) / step) * step).astype(np.float32)
    assert noisy[0].dtype == np.float32 and np.array_equal(noisy[0], want)


class _Words:
    """A source replaying given words (to reach the sampler's far tail deterministically)."""

    private = False

    def __init__(self, words: list[int]) -> None:
        self.w = np.array(words, dtype=np.uint64)

    def words(self, n: int) -> np.ndarray:
        assert n == len(self.w)
        return self.w

    def describe(self) -> str:
        return "fixed words"


def test_normal_sampler_keeps_float_precision_in_the_tails() -> None:
    """A fixed-point uniform's inversion stops at |z| = 8.3 and spaces its values 2^-53/phi(z)
    apart (coarser than a float32 ulp beyond |z| = 6.4); the octave sampler does neither."""
    from edgedp.train import randomness
    deepest = randomness.normal(_Words([0, 0, 1 << 12]), (1,))[0]             # octave 128, sign bit 0
    assert deepest == pytest.approx(13.16, abs=0.01)
    for octave in (0, 30, 100):
        w1 = (1 << (63 - octave)) if octave < 64 else 0
        w2 = 0 if octave < 64 else 1 << (127 - octave)
        a = randomness.normal(_Words([w1, w1, w2, w2, 5 << 12, (5 + 2 ** 12) << 12]), (2,))   # u 2^-40 apart
        gap = abs(a[1] - a[0])
        assert 0 < gap < np.spacing(np.float32(abs(a[0]))) * 2.0 ** -16, (octave, a, gap)
    assert randomness.normal(_Words([1 << 63, 0, (1 << 12) | 1]), (1,))[0] < 0     # the sign bit


def test_deploy_and_report_refuse_a_seeded_model(tmp_path) -> None:
    """Issue 18.1: a --seed model is not private; deploy and report need --allow-non-private and say so."""
    seeded, private = tmp_path / "s.npz", tmp_path / "p.npz"
    _train_json(seeded, "--seed", "3")
    _train_json(private)
    c = tmp_path / "m.c"
    r = CliRunner().invoke(main, ["deploy", str(seeded), "--out", str(c), "--json"])
    assert r.exit_code != 0 and "not a private model" in json.loads(r.stdout)["message"]
    assert "--allow-non-private" in json.loads(r.stdout)["message"] and not c.exists()
    r = CliRunner().invoke(main, ["deploy", str(seeded), "--out", str(c), "--allow-non-private", "--json"])
    assert r.exit_code == 0, r.output
    assert "--seed 3" in json.loads(r.stdout)["non_private"]
    assert "WARNING: not a private model: --seed 3" in c.read_text()
    assert "--seed 3" in json.loads(models_io.manifest_path(seeded).read_text())["deployment"]["non_private"]
    r = CliRunner().invoke(main, ["deploy", str(private), "--out", str(c), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["non_private"] is None and "WARNING" not in c.read_text()
    r = CliRunner().invoke(main, ["report", "--out", str(tmp_path / "rep"), "--model", str(seeded), "--quick",
                                  "--no-dpsgd", "--json", "--no-progress"])
    assert r.exit_code != 0 and "not a private model" in json.loads(r.stdout)["message"]


def test_manifest_without_private_flag_is_not_private() -> None:
    old = models_io.Manifest("0" * 64, {"epsilon": 1.0, "seed": 0}, {})
    assert "seed 0" in models_io.non_private_reason(old)
    with pytest.raises(models_io.ModelFileError, match="--allow-non-private"):
        models_io.private_or_refuse("m.npz", old, False)


def test_max_steps_bisects_over_steps_with_few_accountant_runs(monkeypatch) -> None:
    """Issue 41.6: the step cap is found before training by bisection, not by accounting each step."""
    nm, q, d, upper = 2.0, 0.25, 1e-5, 40
    eps = {t: accountant.epsilon(nm, q, t, d) for t in (7, 8, upper)}
    calls = []
    real = accountant.epsilon
    monkeypatch.setattr(accountant, "epsilon", lambda *a: calls.append(a[2]) or real(*a))
    cap = accountant.max_steps(nm, q, d, (eps[7] + eps[8]) / 2, upper)
    assert (cap.steps, cap.epsilon, cap.epsilon_next) == (7, eps[7], eps[8])
    assert len(calls) <= math.ceil(math.log2(upper)) + 1 and calls[0] == upper
    whole = accountant.max_steps(nm, q, d, eps[upper], upper)
    assert (whole.steps, whole.epsilon_next) == (upper, None)
    none = accountant.max_steps(nm, q, d, accountant.epsilon(nm, q, 1, d) * 0.99, upper)
    assert none.steps == 0 and none.epsilon_next == pytest.approx(real(nm, q, 1, d))
    with pytest.raises(ValueError, match="maximum epsilon"):
        accountant.max_steps(nm, q, d, math.inf, upper)


def test_epochs_end_at_rounded_passes_and_the_last_step() -> None:
    from edgedp.train.run import epoch_ends
    assert epoch_ends(60, 0.25) == list(range(4, 61, 4))
    assert epoch_ends(22, 0.25) == [4, 8, 12, 16, 20, 22]       # 5.5 epochs: the partial one ends at the last step
    assert epoch_ends(10, 0.3) == [3, 7, 10]
    assert epoch_ends(2, 0.25) == [2]


def _train_cli(out, *extra: str):
    r = CliRunner().invoke(main, ["train", "--noise-multiplier", "2", "--epochs", "5", "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    return r


def test_train_logs_epsilon_per_epoch_and_stops_before_max_epsilon(tmp_path) -> None:
    """Issue 41.6: ε after every epoch in the manifest (a plain list) and the progress bar;
    --max-epsilon stops before the step that would exceed it, and the manifest says why."""
    q, d = 0.25, 1e-5
    full = tmp_path / "full.npz"
    r = _train_cli(full)
    t = models_io.read_manifest(full).training
    assert (t["steps"], t["planned_steps"], t["stopped_early"], t["max_epsilon"]) == (20, 20, False, None)
    assert "stop_reason" not in t and t["epoch_steps"] == [4, 8, 12, 16, 20]
    assert t["epsilon_per_epoch"] == [pytest.approx(accountant.epsilon(2.0, q, s, d)) for s in t["epoch_steps"]]
    assert t["epsilon_per_epoch"][-1] == t["epsilon"] and t["epsilon_per_epoch"] == sorted(t["epsilon_per_epoch"])
    for e, eps in enumerate(t["epsilon_per_epoch"], 1):   # the bar shows each epoch's ε (stderr, not stdout)
        assert f"ε {eps:.3g} (PLD, epoch {e})" in r.stderr
    assert "PLD, epoch" not in r.stdout
    cap = (t["epsilon_per_epoch"][1] + t["epsilon_per_epoch"][2]) / 2    # between epochs 2 and 3
    capped = tmp_path / "capped.npz"
    r = _train_cli(capped, "--max-epsilon", f"{cap!r}")
    c = models_io.read_manifest(capped).training
    assert c["stopped_early"] is True and c["planned_steps"] == 20 and c["max_epsilon"] == cap
    assert 8 <= c["steps"] < 12 and c["epoch_steps"] == sorted({4, 8, c["steps"]})
    assert c["epsilon"] <= cap < accountant.epsilon(2.0, q, c["steps"] + 1, d)
    assert c["epsilon_per_epoch"][-1] == c["epsilon"] and len(c["epsilon_per_epoch"]) == len(c["epoch_steps"])
    assert f"--max-epsilon {cap:g}" in c["stop_reason"] and f"stopped after {c['steps']} of 20" in c["stop_reason"]
    assert f"stopped early: {c['stop_reason']}" in r.stdout and f"of max {cap:g} (PLD, epoch 2)" in r.stderr
    # no accuracy is logged with the run's ε: the manifest holds none, per epoch or at the end
    assert not any("accuracy" in k for k in c) and "accuracy" not in json.dumps(c)
    # audit-config recomputes ε from the steps actually run: the claim checks (exit 3: the float sampler's warning)
    r = CliRunner().invoke(main, ["audit-config", str(models_io.manifest_path(capped)), "--no-canary", "--json"])
    assert r.exit_code == 3 and json.loads(r.stdout)["failed"] == [], r.output
    r = CliRunner().invoke(main, ["train", "--noise-multiplier", "2", "--max-epsilon", "0.01", "--out",
                                  str(tmp_path / "none.npz"), "--json", "--no-progress"])
    assert r.exit_code == 4 and "below the ε of a single step" in json.loads(r.stdout)["message"]
    assert not (tmp_path / "none.npz").exists()


def test_seeded_run_shows_not_private_instead_of_epsilon(tmp_path) -> None:
    seeded = tmp_path / "s.npz"
    r = _train_cli(seeded, "--seed", "2", "--max-epsilon", f"{accountant.epsilon(2.0, 0.25, 10, 1e-5)!r}")
    t = models_io.read_manifest(seeded).training
    assert t["epsilon_per_epoch"] == "not private" and t["stopped_early"] is True and t["steps"] == 10
    assert t["epoch_steps"] == [4, 8, 10]
    assert "a seeded run has no ε" in t["stop_reason"] and "ε from" not in t["stop_reason"]
    assert "ε not private" in r.stderr and "PLD, epoch" not in r.stderr
