"""The empirical clipping check: how far can one record move a DP-SGD step?

A canary record with a huge gradient (inputs scaled by 10^4, a label the model does not predict)
is added to a batch of real records; the step's gradient sum is computed with and without it
(same parameters, no noise) and the L2 distance between the two is the canary's influence.
Per-example clipping bounds it by C whatever the canary is; clipping the batch gradient does
not (the canary takes over the batch direction and moves the sum by up to about C * batch)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from . import dpsgd

CANARY_SCALE = 1e4


@dataclass(frozen=True)
class CanaryResult:
    granularity: str
    clip_norm: float
    batch: int
    influence: float          # ||sum(with canary) - sum(without)||
    bound_ratio: float        # influence / C: <= 1 for per-example clipping

    @property
    def bounded(self) -> bool:
        return self.bound_ratio <= 1.0 + 1e-4

    def as_dict(self) -> dict:
        return {**asdict(self), "bounded": self.bounded}


def influence(X: np.ndarray, y: np.ndarray, n_classes: int, clip: float, granularity: str, batch: int = 64,
              hidden: tuple[int, ...] = (), seed: int = 0) -> CanaryResult:
    """The canary's influence on one step's clipped gradient sum (parameters: a random init)."""
    if granularity not in dpsgd.GRANULARITIES:
        raise ValueError(f"clipping must be one of {', '.join(dpsgd.GRANULARITIES)}")
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(y), size=min(batch, len(y)), replace=False)
    d = X.shape[1]
    key = jax.random.PRNGKey(seed)
    params = dpsgd.init_params(d, n_classes, hidden, key)
    # a non-zero output layer, so that real records have non-trivial gradients too
    w, b = params[-1]
    params[-1] = (jax.random.normal(jax.random.fold_in(key, 1), w.shape) * 0.1, b)
    x_can = np.full((1, d), CANARY_SCALE, np.float32)
    pred = int(np.argmax(np.asarray(dpsgd.logits(params, jnp.asarray(x_can)))[0]))
    y_can = np.array([(pred + 1) % n_classes], np.int32)
    xb = np.concatenate([np.asarray(X[idx], np.float32), x_can])
    yb = np.concatenate([np.asarray(y[idx], np.int32), y_can])
    fn = dpsgd.clipped_sum if granularity == "per-example" else dpsgd.batch_clipped_sum
    with_c = np.ones(len(yb), np.float32)
    without = with_c.copy()
    without[-1] = 0.0
    c = jnp.float32(clip)
    a, b2 = fn(params, xb, yb, with_c, c), fn(params, xb, yb, without, c)
    diff = dpsgd.tree_norm(jax.tree_util.tree_map(jnp.subtract, a, b2))
    return CanaryResult(granularity, clip, len(idx), diff, diff / clip)
