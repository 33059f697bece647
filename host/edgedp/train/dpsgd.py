"""DP-SGD (Abadi et al. 2016) in JAX: per-example gradients with ``jax.vmap``, clipped per
example to L2 norm C, summed, Gaussian noise N(0, (noise_multiplier * C)^2 I) added to the sum,
divided by the expected batch size n*q, then an optax optimiser step.

Every random draw (initialisation, batch selection, noise) comes from one ``randomness`` source:
the OS CSPRNG unless a seed is given (a seeded run is reproducible and not private).  The noise is
drawn in float64 on the host and added to the float32 sum in float64; the noisy sum is rounded to
the lattice of step 2^(floor(log2 sigma) - 16) (``noise_lattice``) and then to float32 before the
(jit-compiled) division and optimiser step.

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

from . import randomness

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


def init_params(n_features: int, n_classes: int, hidden: tuple[int, ...],
                key: jax.Array | randomness.Randomness) -> Params:
    """He-initialised hidden layers; the output layer starts at zero (uniform prediction).

    ``key`` is a JAX key (the canary's fixed, public initialisation) or a run's ``Randomness``."""
    sizes = [n_features, *hidden, n_classes]
    params = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        last = i == len(sizes) - 2
        if last:
            w = jnp.zeros((a, b))
        elif isinstance(key, jax.Array):
            key, sub = jax.random.split(key)
            w = jax.random.normal(sub, (a, b)) * math.sqrt(2.0 / a)
        else:
            w = jnp.asarray(randomness.normal(key, (a, b)) * math.sqrt(2.0 / a))
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


def poisson_batches(n: int, q: float, steps: int, src: randomness.Randomness):
    """Indices of each step's batch: every record independently with probability q."""
    for _ in range(steps):
        yield np.flatnonzero(randomness.uniform(src, n) < q)


@functools.lru_cache(maxsize=8)
def _apply_fn(optimizer: str, learning_rate: float, momentum: float):
    """The compiled update step for one optimiser (cached: one compilation per setting): the noisy
    sum divided by the expected batch size, then the optimiser."""
    opt = make_optimizer(Hyper(optimizer=optimizer, learning_rate=learning_rate, momentum=momentum))

    @jax.jit
    def apply(params, state, noisy_sum, denom):
        grads = jax.tree_util.tree_map(lambda g: g / denom, noisy_sum)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    return apply


LATTICE_BITS = 16   # the noisy sum is rounded to a lattice 2^16 to 2^17 times finer than sigma


def noise_lattice(sigma: float) -> float:
    """Step of the lattice the noisy sum is rounded to: the power of two in (sigma*2^-17, sigma*2^-16]."""
    return math.ldexp(1.0, math.floor(math.log2(sigma)) - LATTICE_BITS)


def add_noise(gsum, sigma: float, src: randomness.Randomness):
    """gsum + N(0, sigma^2) on every coordinate: float64 noise from ``src`` added in float64, the
    result rounded to the ``noise_lattice`` (an absolute grid: the float attacks read the
    sample's low bits, which the rounding removes) and then to float32."""
    leaves, tdef = jax.tree_util.tree_flatten(gsum)
    step = noise_lattice(sigma)
    noisy = [(np.round((np.asarray(g, np.float64) + sigma * randomness.normal(src, g.shape)) / step) * step)
             .astype(np.float32) for g in leaves]
    return jax.tree_util.tree_unflatten(tdef, noisy)


@dataclass
class Trained:
    params: list[tuple[np.ndarray, np.ndarray]]   # (w, b) per layer, host copies
    steps: int
    batch_sizes: np.ndarray   # realised Poisson batch size per step
    blocks_over: int          # steps whose batch needed more than one block
    private: bool             # every draw from the OS CSPRNG (False: seeded, replayable)
    randomness: str           # where the draws came from


def train(X: np.ndarray, y: np.ndarray, n_classes: int, noise_multiplier: float, clip: float, steps: int,
          hyper: Hyper, seed: int | None = None, progress: Callable[[int], None] | None = None,
          clipping: str = "per-example") -> Trained:
    """DP-SGD for ``steps`` steps on (X, y) with y class indices 0..n_classes-1.

    ``seed`` None (the default): every draw from the OS CSPRNG, a private run; an integer: a
    reproducible run that is not private (the seed replays the noise).
    ``clipping="per-batch"`` swaps in ``batch_clipped_sum``: the configuration error that
    ``audit-config`` and ``audit-train`` detect (never a choice for a real training)."""
    if clipping not in GRANULARITIES:
        raise ValueError(f"clipping must be one of {', '.join(GRANULARITIES)}")
    summed = clipped_sum if clipping == "per-example" else batch_clipped_sum
    n, d = X.shape
    q = hyper.sampling_rate
    src = randomness.source(seed)
    params = init_params(d, n_classes, hyper.hidden, src)
    state = make_optimizer(hyper).init(params)
    rows = block_rows(n, q)
    Xj = np.asarray(X, np.float32)
    yj = np.asarray(y, np.int32)
    sigma = float(noise_multiplier * clip)
    denom = jnp.float32(n * q)
    clip_j = jnp.float32(clip)
    apply = _apply_fn(hyper.optimizer, hyper.learning_rate, hyper.momentum)

    sizes = np.zeros(steps, dtype=np.int64)
    over = 0
    for t, idx in enumerate(poisson_batches(n, q, steps, src)):
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
        params, state = apply(params, state, add_noise(gsum, sigma, src), denom)
        if progress:
            progress(t + 1)
    return Trained(params=[(np.asarray(w), np.asarray(b)) for w, b in params], steps=steps,
                   batch_sizes=sizes, blocks_over=over, private=src.private, randomness=src.describe())


def predict_logits(params, X: np.ndarray) -> np.ndarray:
    return np.asarray(logits([(jnp.asarray(w), jnp.asarray(b)) for w, b in params], jnp.asarray(X, jnp.float32)))


def steps_for(epochs: float, q: float) -> int:
    """Steps for ``epochs`` expected passes over the data at sampling rate q."""
    return max(1, round(epochs / q))
