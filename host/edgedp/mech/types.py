"""The mechanism's values as both the device and the reference speak them: its configuration,
the budget caps, one released answer and the raw-noise request and answer (the wire's bodies are
packed and parsed in edgedp.device.protocol; these types sit below it so that the bit-exact
reference needs no device code)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import schema as S
from .lattice import MICRO, Lattice, make_lattice, to_epsilon
from .modes import MODE_TOPK, Mode, Released


def m_wire(m: int | None) -> int:
    return S.M_AUTO if m is None else m


def m_host(m: int) -> int | None:
    return None if m == S.M_AUTO else m


@dataclass(frozen=True)
class MechConfig:
    """The mechanism's configuration (edp_mech_config_t): per-query epsilon in micro-epsilon,
    input/output range [lo, hi], L1 sensitivity, lattice exponent m (None: automatic)."""

    eps_micro: int = MICRO
    lo: float = 0.0
    hi: float = 1.0
    sensitivity: float = 2.0
    m: int | None = None

    def lattice(self, k: int) -> Lattice:
        """The lattice and sampler tables for k classes; ConfigError where the device says ERR_BAD_VALUE."""
        return make_lattice(k, self.eps_micro, self.sensitivity, self.lo, self.hi, self.m)

    def same_on_device(self, other: "MechConfig") -> bool:
        """True iff both configure the device identically (ranges and sensitivity as float32)."""
        f = np.float32
        return (self.eps_micro, f(self.lo), f(self.hi), f(self.sensitivity), self.m) == \
            (other.eps_micro, f(other.lo), f(other.hi), f(other.sensitivity), other.m)


@dataclass(frozen=True)
class Caps:
    """Budget caps in micro-epsilon: per UTC day, and in total (0: no lifetime cap)."""

    daily: int
    lifetime: int = 0


@dataclass
class QueryResult:
    """One answer decoded to the integers the device sent (``lattice``: its lattice values,
    or units of 10^-D for round:D), from a device or from ``mech.reference``.

    ``remaining_micro`` (micro-epsilon left today) and ``ticks`` (of the DP step, in the
    board's tick unit) come from a device only."""

    mode: Mode
    m: int
    k: int
    lattice: np.ndarray
    indices: np.ndarray | None = None
    label: int = 0
    level: int | None = None
    remaining_micro: int | None = None
    ticks: int | None = None

    @classmethod
    def from_release(cls, r: Released, mode: Mode, m: int, k: int, **device: int) -> "QueryResult":
        """The answer of row 0 of a ``modes.release``; ``device`` may give remaining_micro and ticks."""
        lattice = np.zeros(0, dtype=np.int64) if r.lattice is None else np.asarray(r.lattice[0], dtype=np.int64)
        label = int(np.argmax(lattice)) if r.label is None else int(r.label[0])
        return cls(mode, m, k, lattice, None if r.indices is None else np.asarray(r.indices[0], dtype=np.int64),
                   label, None if r.level is None else int(r.level[0]), **device)

    @property
    def remaining(self) -> float | None:
        """Epsilon the device still allows today after this answer (daily and lifetime room)."""
        return None if self.remaining_micro is None else to_epsilon(self.remaining_micro)

    @property
    def values(self) -> np.ndarray | None:
        """Released values in host units (None for label and bucket)."""
        if not (self.mode.sends_values or self.mode.kind == MODE_TOPK):
            return None
        return self.mode.values(self.lattice, self.m)

    def same_answer(self, other: "QueryResult") -> bool:
        """True iff both carry exactly the same released integers (mode, lattice, indices, label, level)."""
        def same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
            return (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
        return (self.mode, self.m, self.k, self.label, self.level) == \
            (other.mode, other.m, other.k, other.label, other.level) and \
            same(self.lattice, other.lattice) and same(self.indices, other.indices)


@dataclass(frozen=True)
class SampleRequest:
    """SAMPLE: ``count`` raw noise samples of the [0, 1] lattice for k classes."""

    eps_micro: int
    sensitivity: float
    k: int
    count: int
    m: int | None = None

    FMT = S.SAMPLE_REQUEST_FMT

    def pack(self) -> bytes:
        if not 0 <= self.count <= S.SAMPLE_MAX:
            raise ValueError(f"one SAMPLE request draws 0..{S.SAMPLE_MAX} samples, not {self.count}")
        return self.FMT.pack(self.eps_micro, self.sensitivity, self.k, self.count, m_wire(self.m))


@dataclass(frozen=True)
class SampleAnswer:
    """m i8 | J u8 | count u16 | count x i32 noise in lattice steps."""

    m: int
    J: int
    noise: np.ndarray
