"""Membership inference against the protected API: does one answer reveal whether a record
was in the training set?

Attacks (all see exactly what the output mode releases, one answer per record, see
``mechanism.membership_score``):

* ``threshold``: the score itself (high confidence on the true label -> member);
* ``lira_online`` / ``lira_offline``: the likelihood-ratio attack of Carlini et al. (2022).
  The attacker trains shadow models on random halves of the pool, queries them through the
  same public mechanism (same epsilon and mode, fresh noise), and fits per-example
  distributions of the score for models that did ("in") and did not ("out") train on the
  record.  Online scores log N(s; mu_in, sigma_in^2) - log N(s; mu_out, sigma_out^2);
  offline uses only the out models, (s - mu_out) / sigma_out.  Means are per example; the
  variances are global (pooled over examples) below 64 shadows, as the paper recommends,
  and per example from 64 on.  For the discrete scores of label and bucket, the Gaussians
  are replaced by per-example frequencies (add-1/2 smoothing): online log p_in(s) - log
  p_out(s), offline -log P_out(S >= s).

Evaluation is leave-one-out over the population (Carlini et al.): every model in turn is the
target and the other M - 1 are its shadows; ROC curves pool all targets, so the low-FPR
operating points rest on M * n/2 non-member answers.

Also the averaging attack: how close the mean of the answers one daily budget buys for a
single input gets to the raw output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

from ..mech.lattice import make_lattice, to_micro
from ..mech.modes import Mode
from . import accounting
from .protected_api import SOFTMAX, Mechanism, ensemble, is_discrete, membership_score
from .populations import Population
from .parallel import pmap, rng_for

ATTACKS = ("threshold", "lira_online", "lira_offline")
FIXED_VARIANCE_BELOW = 64
ROC_GRID = np.logspace(-5, 0, 161)


def tpr_at(fpr: np.ndarray, tpr: np.ndarray, alpha: float) -> float:
    """TPR at the largest operating point with FPR <= alpha."""
    ok = fpr <= alpha + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


def summarize(scores: np.ndarray, members: np.ndarray) -> tuple[dict, tuple[np.ndarray, np.ndarray]]:
    """AUC, TPR at 1% and 0.1% FPR, and the ROC on a log-spaced FPR grid."""
    fpr, tpr, _ = roc_curve(members, scores)
    grid_tpr = np.array([tpr_at(fpr, tpr, a) for a in ROC_GRID])
    return ({"auc": float(roc_auc_score(members, scores)),
             "tpr_at_1pct_fpr": tpr_at(fpr, tpr, 0.01),
             "tpr_at_0_1pct_fpr": tpr_at(fpr, tpr, 0.001)},
            (ROC_GRID.copy(), grid_tpr))


def _mean_var(s: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-column weighted mean, variance and count of s (N, n) over rows with w True."""
    cnt = w.sum(axis=0)
    mu = np.where(cnt > 0, (s * w).sum(axis=0) / np.maximum(cnt, 1), np.nan)
    dev = np.where(w, s - np.nan_to_num(mu), 0.0)
    var = np.where(cnt > 1, (dev ** 2).sum(axis=0) / np.maximum(cnt - 1, 1), np.nan)
    return mu, var, cnt


def lira_gaussian(obs: np.ndarray, shadow: np.ndarray, inside: np.ndarray, online: bool,
                  fixed_variance: bool) -> np.ndarray:
    """LiRA scores (higher = member) for observed scores obs (n,) given shadow scores (N, n)."""
    floor = 1e-6
    mu_out, var_out, n_out = _mean_var(shadow, ~inside)
    g_out = np.nanmean(shadow[~inside]) if (~inside).any() else 0.0
    mu_out = np.where(n_out > 0, mu_out, g_out)
    pooled_out = _pooled_var(shadow, ~inside, mu_out)
    var_out = np.full_like(mu_out, pooled_out) if fixed_variance else np.where(n_out > 1, var_out, pooled_out)
    var_out = np.maximum(var_out, floor)
    if not online:
        return (obs - mu_out) / np.sqrt(var_out)
    mu_in, var_in, n_in = _mean_var(shadow, inside)
    g_in = np.nanmean(shadow[inside]) if inside.any() else 0.0
    mu_in = np.where(n_in > 0, mu_in, g_in)
    pooled_in = _pooled_var(shadow, inside, mu_in)
    var_in = np.full_like(mu_in, pooled_in) if fixed_variance else np.where(n_in > 1, var_in, pooled_in)
    var_in = np.maximum(var_in, floor)
    return (-0.5 * (obs - mu_in) ** 2 / var_in - 0.5 * np.log(var_in)
            + 0.5 * (obs - mu_out) ** 2 / var_out + 0.5 * np.log(var_out))


def _pooled_var(s: np.ndarray, w: np.ndarray, mu: np.ndarray) -> float:
    dev = np.where(w, s - mu, 0.0)
    n = w.sum()
    return float((dev ** 2).sum() / max(n - 1, 1)) if n > 1 else 1.0


def lira_discrete(obs: np.ndarray, shadow: np.ndarray, inside: np.ndarray, online: bool,
                  support: np.ndarray) -> np.ndarray:
    """LiRA with per-example categorical frequencies for discrete scores."""
    a = 0.5
    oh = shadow[None, :, :] == support[:, None, None]              # (V, N, n)
    c_out = (oh & ~inside).sum(axis=1) + a                         # (V, n)
    p_out = c_out / c_out.sum(axis=0)
    j = np.searchsorted(support, obs)                              # index of obs in support
    cols = np.arange(len(obs))
    if not online:
        tail = np.cumsum(p_out[::-1], axis=0)[::-1]                # P_out(S >= support[v])
        return -np.log(tail[j, cols])
    c_in = (oh & inside).sum(axis=1) + a
    p_in = c_in / c_in.sum(axis=0)
    return np.log(p_in[j, cols]) - np.log(p_out[j, cols])


def attack_scores(scores: np.ndarray, masks: np.ndarray, discrete: bool,
                  targets: list[int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Leave-one-out: for each target model, attack its answers with the others as shadows.

    scores (M, n) what each model's answer lets the attacker compute; returns per attack the
    pooled (scores, is_member) over all targets."""
    M = len(scores)
    fixed = (M - 1) < FIXED_VARIANCE_BELOW
    support = np.unique(scores) if discrete else None   # None: continuous scores
    out: dict[str, tuple[list, list]] = {a: ([], []) for a in ATTACKS}
    for i in targets:
        others = np.arange(M) != i
        obs, sh, ins = scores[i], scores[others], masks[others]
        res = {"threshold": obs}
        for name, online in (("lira_online", True), ("lira_offline", False)):
            res[name] = (lira_discrete(obs, sh, ins, online, support) if support is not None
                         else lira_gaussian(obs, sh, ins, online, fixed))
        for a in ATTACKS:
            out[a][0].append(res[a])
            out[a][1].append(masks[i])
    return {a: (np.concatenate(s), np.concatenate(m)) for a, (s, m) in out.items()}


@dataclass
class MiaResult:
    rows: list[dict] = field(default_factory=list)
    rocs: dict[tuple[str, str, str, float], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    averaging: list[dict] = field(default_factory=list)


def _cell(x_pool: np.ndarray, y_pool: np.ndarray, masks: np.ndarray, mech: Mechanism, mode: Mode,
          epsilon: float, seed: int, targets: list[int]) -> tuple[list[dict], dict]:
    k = x_pool.shape[-1]
    rel = mech.release(x_pool, epsilon, mode, rng_for(seed, "mia", mech.name, str(mode), str(epsilon)))
    s = membership_score(rel, y_pool[None, :], mode, mech, k)
    pooled = attack_scores(s, masks, is_discrete(mode), targets)
    rows, rocs = [], {}
    for attack, (sc, mem) in pooled.items():
        summary, roc = summarize(sc, mem)
        rows.append({"mechanism": mech.name, "attack": attack, "mode": str(mode), "epsilon": epsilon,
                     **summary,
                     "auc_bound": accounting.auc_bound(epsilon),
                     "tpr_bound_at_1pct_fpr": accounting.tpr_bound(epsilon, 0.01),
                     "tpr_bound_at_0_1pct_fpr": accounting.tpr_bound(epsilon, 0.001),
                     "members": int(mem.sum()), "nonmembers": int((~mem).sum()),
                     "targets": len(targets), "shadows": len(masks) - 1})
        rocs[(mech.name, attack, str(mode), epsilon)] = roc
    return rows, rocs


def run(pop: Population, y_pool: np.ndarray, modes: list[Mode], epsilons: list[float], seed: int,
        targets: int | None = None, jobs: int = 1, progress: bool = True,
        include_ensemble: bool = True) -> MiaResult:
    """Every attack for every (mechanism, mode, epsilon); ``targets`` models take a turn as target."""
    if pop.size < 3:
        raise ValueError("membership inference needs at least 2 shadow models")
    tl = list(range(min(targets or pop.size, pop.size)))
    mechs = [(SOFTMAX, pop.pool_probs)]
    if include_ensemble and pop.pool_votes is not None:
        mechs.append((ensemble(pop.teachers), pop.pool_votes))
    tasks = [(x, y_pool, pop.masks, mech, mode, eps, seed, tl)
             for mech, x in mechs for mode in modes for eps in epsilons]
    res = MiaResult()
    for rows, rocs in pmap(_cell, tasks, jobs=jobs, desc="membership inference", progress=progress, star=True):
        res.rows += rows
        res.rocs.update(rocs)
    return res


def threshold_on(x: np.ndarray, y: np.ndarray, members: np.ndarray, mech: Mechanism, modes: list[Mode],
                 epsilons: list[float], seed: int) -> list[dict]:
    """The threshold attack on one given model: its outputs ``x`` (n, k) on records of labels ``y``,
    ``members`` marking the records it trained on. One answer per record through the mechanism at
    each mode and epsilon. (LiRA needs shadow models trained like the target, which a model
    brought from elsewhere does not come with.)"""
    rows = []
    for mode in modes:
        for epsilon in epsilons:
            rel = mech.release(x, epsilon, mode, rng_for(seed, "mia-model", mech.name, str(mode), str(epsilon)))
            summary, _ = summarize(membership_score(rel, y, mode, mech, x.shape[-1]), members)
            rows.append({"mechanism": mech.name, "attack": "threshold", "mode": str(mode), "epsilon": epsilon,
                         **summary, "auc_bound": accounting.auc_bound(epsilon),
                         "tpr_bound_at_1pct_fpr": accounting.tpr_bound(epsilon, 0.01),
                         "tpr_bound_at_0_1pct_fpr": accounting.tpr_bound(epsilon, 0.001),
                         "members": int(members.sum()), "nonmembers": int((~members).sum()),
                         "targets": 1, "shadows": 0})
    return rows


# ---- averaging: many answers for one input ----------------------------------------------

def clamped_mean(x: np.ndarray, b: float, lo: float, hi: float) -> np.ndarray:
    """E[clamp(x + Z, lo, hi)] for Z ~ Laplace(b) (the lattice noise at step g << b)."""
    def F(u: np.ndarray) -> np.ndarray:  # antiderivative of P(Z > u)
        return np.where(u >= 0, -0.5 * b * np.exp(-np.abs(u) / b), u - 0.5 * b * np.exp(-np.abs(u) / b))
    return lo + F(hi - x) - F(lo - x)


def debias(mean: np.ndarray, b: float, lo: float, hi: float, iters: int = 60) -> np.ndarray:
    """Invert clamped_mean (increasing in x) by bisection: the attacker's estimate of x."""
    m = np.clip(mean, clamped_mean(np.asarray(lo), b, lo, hi), clamped_mean(np.asarray(hi), b, lo, hi))
    a, c = np.full_like(m, lo, dtype=np.float64), np.full_like(m, hi, dtype=np.float64)
    for _ in range(iters):
        mid = 0.5 * (a + c)
        below = clamped_mean(mid, b, lo, hi) < m
        a, c = np.where(below, mid, a), np.where(below, c, mid)
    return 0.5 * (a + c)


def averaging(x: np.ndarray, mech: Mechanism, epsilons: list[float], daily_cap: float, seed: int,
              days: int = 1, delta: float = accounting.DEFAULT_DELTA, chunk: int = 200_000) -> list[dict]:
    """For each finite epsilon: q = floor(days * daily_cap / epsilon) full answers per input;
    error of the naive mean and of the debiased mean against the raw (noise-free) output."""
    full = Mode.parse("full")
    raw = mech.release(x, math.inf, full, rng_for(seed))["values"]
    n, k = x.shape
    rows = []
    for eps in epsilons:
        if not math.isfinite(eps):
            continue
        q = int(math.floor(days * daily_cap / eps + 1e-9))
        if q < 1:
            continue
        lat = make_lattice(k, to_micro(eps), mech.sensitivity, mech.lo, mech.hi)
        b = lat.t * lat.granularity
        total = np.zeros((n, k))
        rng = rng_for(seed, "averaging", mech.name, str(eps))
        per = max(1, chunk // (n * k))
        done = 0
        while done < q:
            m = min(per, q - done)
            rel = mech.release(np.broadcast_to(x, (m, n, k)), eps, full, rng)["values"]
            total += rel.sum(axis=0)
            done += m
        naive = total / q
        est = debias(naive, b, mech.lo, mech.hi)
        span = mech.hi - mech.lo
        rows.append({
            "mechanism": mech.name, "epsilon": eps, "daily_cap": daily_cap, "days": days, "queries": q,
            "noise_scale": b,
            "mae_naive": float(np.abs(naive - raw).mean() / span),
            "mae_debiased": float(np.abs(est - raw).mean() / span),
            "agreement_naive": float(np.mean(naive.argmax(1) == raw.argmax(1))),
            "agreement_debiased": float(np.mean(est.argmax(1) == raw.argmax(1))),
            "epsilon_basic": accounting.basic(eps, q),
            "epsilon_pld": accounting.pld(eps, q, delta), "delta": delta})
    return rows
