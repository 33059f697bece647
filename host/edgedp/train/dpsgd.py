"""DP-SGD (Abadi et al. 2016) in JAX: per-example gradients with ``jax.vmap``, clipped per
example to L2 norm C, summed, Gaussian noise N(0, (noise_multiplier * C)^2 I) added to the sum,
divided by the expected batch size n*q, then an optax optimiser step.

Batches are Poisson subsamples: every record is included in a step independently with
probability q (what the accountant assumes).  The batch size varies from step to step; the
compiled step takes a fixed ``slots``-row block with a mask, so nothing recompiles per size.  A
batch larger than ``slots`` (probability below 1e-6 per step by the choice of ``slots``) is summed
over several blocks before the noise is added, so the rare large batch is processed exactly,
never truncated.

Models are dense networks with ReLU hidden layers (``hidden = ()`` is multinomial logistic
regression); parameters are a list of (W, b) with W of shape (in, out), as ``models_io`` stores.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

Params = list[tuple[jax.Array, jax.Array]]
GRANULARITIES = ("per-example", "per-batch")


@dataclass(frozen=True)
class Hyper:
    """Training hyperparameters (everything but the privacy parameters)."""

    hidden: tuple[int, ...] = ()
    optimizer: str = "adam"
    learning_rate: float = 0.05
    momentum: float = 0.0
    epochs: float = 15.0
    sampling_rate: float = 0.25


def make_optimizer(hyper: Hyper) -> optax.GradientTransformation:
    if hyper.optimizer == "adam":
        return optax.adam(hyper.learning_rate)
    if hyper.optimizer == "sgd":
        return optax.sgd(hyper.learning_rate, momentum=hyper.momentum or None)
    raise ValueError(f"unknown optimizer {hyper.optimizer!r}: use adam or sgd")


def init_params(n_features: int, n_classes: int, hidden: tuple[int, ...], key: jax.Array) -> Params:
    """He-initialised hidden layers; the output layer starts at zero (uniform prediction)."""
    sizes = [n_features, *hidden, n_classes]
    params = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, sub = jax.random.split(key)
        last = i == len(sizes) - 2
        w = jnp.zeros((a, b)) if last else jax.random.normal(sub, (a, b)) * math.sqrt(2.0 / a)
        params.append((w.astype(jnp.float32), jnp.zeros((b,), jnp.float32)))
    return params


def logits(params: Params, x: jax.Array) -> jax.Array:
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return h @ w + b


def _loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Cross-entropy of one example (y is a class index)."""
    z = logits(params, x)
    return jax.nn.logsumexp(z) - z[y]


_per_example_grads = jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))


def _norms(grads) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree_util.tree_leaves(grads)))


@jax.jit
def clipped_sum(params: Params, x: jax.Array, y: jax.Array, mask: jax.Array, clip: jax.Array):
    """Sum over the masked rows of the per-example gradients, each clipped to L2 norm ``clip``.

    Whatever one row's gradient, its contribution to the sum has norm <= clip."""
    g = _per_example_grads(params, x, y)
    scale = jnp.minimum(1.0, clip / jnp.maximum(_norms(g), 1e-12)) * mask
    return jax.tree_util.tree_map(lambda a: jnp.tensordot(scale, a, axes=1), g)


@jax.jit
def batch_clipped_sum(params: Params, x: jax.Array, y: jax.Array, mask: jax.Array, clip: jax.Array):
    """The configuration error that ``audit-config`` detects: the *batch* gradient sum clipped to
    norm clip * (rows in the batch).  One row's influence on it is not bounded by clip."""
    g = _per_example_grads(params, x, y)
    s = jax.tree_util.tree_map(lambda a: jnp.tensordot(mask, a, axes=1), g)
    norm = jnp.sqrt(sum(jnp.sum(a ** 2) for a in jax.tree_util.tree_leaves(s)))
    bound = clip * jnp.sum(mask)
    return jax.tree_util.tree_map(lambda a: a * jnp.minimum(1.0, bound / jnp.maximum(norm, 1e-12)), s)


def tree_norm(tree) -> float:
    return float(jnp.sqrt(sum(jnp.sum(a ** 2) for a in jax.tree_util.tree_leaves(tree))))


def block_rows(n: int, q: float) -> int:
    """Rows of the compiled block: the expected batch n*q plus 5 standard deviations (a Poisson
    batch exceeds it with probability < 1e-6), rounded up to a multiple of 8."""
    mean = n * q
    rows = math.ceil(mean + 5.0 * math.sqrt(mean * (1.0 - q)) + 1)
    return max(8, -(-min(rows, n) // 8) * 8)


def poisson_batches(n: int, q: float, steps: int, rng: np.random.Generator):
    """Indices of each step's batch: every record independently with probability q."""
    for _ in range(steps):
        yield np.flatnonzero(rng.random(n) < q)


@functools.lru_cache(maxsize=8)
def _apply_fn(optimizer: str, learning_rate: float, momentum: float):
    """The compiled noise-and-update step for one optimiser (cached: one compilation per setting)."""
    opt = make_optimizer(Hyper(optimizer=optimizer, learning_rate=learning_rate, momentum=momentum))

    @jax.jit
    def apply(params, state, gsum, key, sigma, denom):
        leaves, tdef = jax.tree_util.tree_flatten(gsum)
        keys = jax.random.split(key, len(leaves))
        noisy = [(g + sigma * jax.random.normal(k, g.shape, g.dtype)) / denom for g, k in zip(leaves, keys)]
        updates, state = opt.update(jax.tree_util.tree_unflatten(tdef, noisy), state, params)
        return optax.apply_updates(params, updates), state

    return apply


@dataclass
class Trained:
    params: Params
    steps: int
    batch_sizes: np.ndarray   # realised Poisson batch size per step
    blocks_over: int          # steps whose batch needed more than one block


def train(X: np.ndarray, y: np.ndarray, n_classes: int, noise_multiplier: float, clip: float, steps: int,
          hyper: Hyper, seed: int, progress: Callable[[int], None] | None = None,
          clipping: str = "per-example") -> Trained:
    """DP-SGD for ``steps`` steps on (X, y) with y class indices 0..n_classes-1.

    ``clipping="per-batch"`` swaps in ``batch_clipped_sum``: the configuration error that
    ``audit-config`` and ``audit-train`` detect (never a choice for a real training)."""
    if clipping not in GRANULARITIES:
        raise ValueError(f"clipping must be one of {', '.join(GRANULARITIES)}")
    summed = clipped_sum if clipping == "per-example" else batch_clipped_sum
    n, d = X.shape
    q = hyper.sampling_rate
    key = jax.random.PRNGKey(seed)
    key, init_key = jax.random.split(key)
    params = init_params(d, n_classes, hyper.hidden, init_key)
    state = make_optimizer(hyper).init(params)
    rows = block_rows(n, q)
    Xj = np.asarray(X, np.float32)
    yj = np.asarray(y, np.int32)
    sigma = jnp.float32(noise_multiplier * clip)
    denom = jnp.float32(n * q)
    clip_j = jnp.float32(clip)
    apply = _apply_fn(hyper.optimizer, hyper.learning_rate, hyper.momentum)

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xD95]))
    sizes = np.zeros(steps, dtype=np.int64)
    over = 0
    for t, idx in enumerate(poisson_batches(n, q, steps, rng)):
        sizes[t] = len(idx)
        gsum = None
        chunks = [idx[i:i + rows] for i in range(0, len(idx), rows)] or [idx]
        over += len(chunks) > 1
        for c in chunks:
            # fresh host buffers every block: JAX may read a NumPy buffer asynchronously (zero-copy on
            # CPU), so a buffer handed to a computation is never written again
            m = len(c)
            xb = np.zeros((rows, d), np.float32)
            yb = np.zeros(rows, np.int32)
            xb[:m], yb[:m] = Xj[c], yj[c]
            mask = (np.arange(rows) < m).astype(np.float32)
            s = summed(params, xb, yb, mask, clip_j)
            gsum = s if gsum is None else jax.tree_util.tree_map(jnp.add, gsum, s)
        key, sub = jax.random.split(key)
        params, state = apply(params, state, gsum, sub, sigma, denom)
        if progress:
            progress(t + 1)
    return Trained(params=[(np.asarray(w), np.asarray(b)) for w, b in params], steps=steps,
                   batch_sizes=sizes, blocks_over=over)


def predict_logits(params, X: np.ndarray) -> np.ndarray:
    return np.asarray(logits([(jnp.asarray(w), jnp.asarray(b)) for w, b in params], jnp.asarray(X, jnp.float32)))


def steps_for(epochs: float, q: float) -> int:
    """Steps for ``epochs`` expected passes over the data at sampling rate q."""
    return max(1, round(epochs / q))
