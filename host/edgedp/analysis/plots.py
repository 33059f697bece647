"""PNG figures for the report (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import accounting  # noqa: E402

INF_AT = 40.0  # where epsilon = inf (no noise) sits on the log-epsilon axis
COLORS = {"softmax": "tab:red", "ensemble": "tab:blue", "dpsgd": "tab:green"}
ATTACK_STYLE = {"threshold": ":", "lira_online": "-", "lira_offline": "--"}


def _x(eps: float) -> float:
    return INF_AT if math.isinf(eps) else eps


def _eps_axis(ax, epsilons: list[float]) -> None:
    ax.set_xscale("log")
    ticks = sorted({_x(e) for e in epsilons})
    ax.set_xticks(ticks)
    ax.set_xticklabels(["∞" if t == INF_AT else f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("per-query ε (∞ = no noise)")


def tradeoff(rows: list[dict], mode: str, chance: float, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    eps = sorted({r["epsilon"] for r in rows}, key=_x)
    for mech in ("softmax", "ensemble", "dpsgd"):
        sel = sorted((r for r in rows if r["mechanism"] == mech and r["mode"] == mode), key=lambda r: _x(r["epsilon"]))
        if not sel:
            continue
        xs = [_x(r["epsilon"]) for r in sel]
        name = {"softmax": "single model (softmax, Δ=2)", "ensemble": "teacher ensemble (votes, Δ=2)",
                "dpsgd": "DP-SGD model (ε spent in training)"}[mech]
        ax.plot(xs, [r["accuracy"] for r in sel], "o-", color=COLORS[mech], label=f"{name}: accuracy")
        ax.plot(xs, [r["agreement"] for r in sel], "s--", color=COLORS[mech], alpha=0.6,
                label=f"{name}: agreement with non-private")
    ax.axhline(chance, color="grey", lw=1, ls=":", label="chance (majority class)")
    _eps_axis(ax, eps)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("fraction of test inputs")
    ax.set_title(f"What ε costs: top-1 accuracy, mode {mode}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def roc(rocs: dict, mechanism: str, attack: str, mode: str, path: Path) -> Path:
    """ROC curves on log-log axes, one per epsilon, with the eps-DP bound for each."""
    fig, ax = plt.subplots(figsize=(5.2, 5.0))
    keys = sorted((k for k in rocs if k[0] == mechanism and k[1] == attack and k[2] == mode), key=lambda k: _x(k[3]))
    cmap = plt.get_cmap("viridis")
    for i, key in enumerate(keys):
        fpr, tpr = rocs[key]
        c = cmap(i / max(1, len(keys) - 1))
        label = "ε = ∞" if math.isinf(key[3]) else f"ε = {key[3]:g}"
        ax.plot(fpr, np.maximum(tpr, 1e-5), color=c, label=label)
        if math.isfinite(key[3]) and key[3] <= 2:
            bound = [accounting.tpr_bound(key[3], a) for a in fpr]
            ax.plot(fpr, bound, color=c, ls=":", lw=0.8)
    ax.plot([1e-5, 1], [1e-5, 1], color="grey", lw=1, ls="--", label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e-4, 1)
    ax.set_ylim(1e-4, 1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(f"{attack} vs {mechanism}, mode {mode}\n(dotted: ε-DP bound)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, which="both")
    return _save(fig, path)


def auc(rows: list[dict], mode: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    eps = sorted({r["epsilon"] for r in rows}, key=_x)
    for mech in ("softmax", "ensemble", "dpsgd"):
        for attack, ls in ATTACK_STYLE.items():
            sel = sorted((r for r in rows if r["mechanism"] == mech and r["mode"] == mode and r["attack"] == attack),
                         key=lambda r: _x(r["epsilon"]))
            if sel:
                ax.plot([_x(r["epsilon"]) for r in sel], [r["auc"] for r in sel], ls, marker="o", ms=3,
                        color=COLORS[mech], label=f"{mech}: {attack}")
    fin = [e for e in eps if math.isfinite(e)]
    if fin:
        ax.plot(fin, [min(1.0, accounting.auc_bound(e)) for e in fin], color="black", lw=1,
                label="ε-DP bound on AUC")
    ax.axhline(0.5, color="grey", lw=1, ls=":")
    _eps_axis(ax, eps)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("membership inference AUC")
    ax.set_title(f"What ε buys: membership inference, mode {mode}")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def extraction(rows: list[dict], mechanism: str, mode: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sel = [r for r in rows if r["mechanism"] == mechanism and r["mode"] == mode]
    eps = sorted({r["epsilon"] for r in sel}, key=_x)
    cmap = plt.get_cmap("viridis")
    for i, e in enumerate(eps):
        s = sorted((r for r in sel if r["epsilon"] == e), key=lambda r: r["queries"])
        ax.plot([r["queries"] for r in s], [r["agreement"] for r in s], "o-", ms=3,
                color=cmap(i / max(1, len(eps) - 1)), label="ε = ∞" if math.isinf(e) else f"ε = {e:g}")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("attacker's queries (one answer per input)")
    ax.set_ylabel("surrogate agrees with victim (held-out)")
    ax.set_title(f"Model extraction vs query budget: {mechanism}, mode {mode}")
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
