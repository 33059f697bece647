"""What the release deadline's constants must cover (firmware/core/src/deadline.c).

The deadline bounds a window's instructions by fixed draws x (one draw's fast path) + the slow
paths, each counted with its own tail bound, x (their longest paths) + refills x (one refill) +
the parts fixed by the request (deadline.h). This module measures, on the compiled image under
Unicorn, what those constants must cover:

- ``regions``: static instruction counts of the sampling loop's regions in edp_dlap_noisy (the
  asm labels edp_dlap_noisy_draw, _store, _exit, _refill, _accept, _high and the local
  subroutines _load and _flush): no region has a backward branch within one draw, so a draw
  executes each instruction of its region at most once, and a class its store region once;
- ``static``: instructions in the code of edp_dlap_accept_rest, edp_dlap_band and
  edp_dlap_high_part (one pass: the tie inlined), and accept_exact's own code;
- ``product``: the exact acceptance threshold's product for nchunks chunks: its loop trip counts
  depend on nchunks only, so one call measures it exactly;
- ``less_than``: a comparison over n limbs, run with a keystream forced equal to the limbs so that
  it goes through every one (its longest path);
- ``refill``: edp_drbg_next_block (EDP_DRBG_BATCH_BLOCKS = 6 ChaCha12 blocks and the key erasure: no data-dependent branch);
- ``prepare``: edp_mech_prepare (with the deadline's own set-up) by (L, nchunks), every L;
- :func:`nonfinite_paths`: answer.c's finite_output (the check of a model's outputs, the fixed
  vector for a non-finite one) by class count, its longest path, and its call site.

:func:`windows` runs whole QUERY / INFER windows of the production timing image and splits each
into the noise (edp_dlap_noisy, the quantisation included, from its entry to edp_mech_output's)
and the rest.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs

from ..device.client import Device, load_key
from ..device.protocol import Caps, MechConfig
from ..mech.lattice import MICRO
from .trace import Emulator, TraceLink

LOOP = "edp_dlap_noisy"
REGIONS = (LOOP, f"{LOOP}_draw", f"{LOOP}_store", f"{LOOP}_exit", f"{LOOP}_refill", f"{LOOP}_accept",
           f"{LOOP}_high", f"{LOOP}_load", f"{LOOP}_flush")
SLOW = ("edp_dlap_accept_rest", "edp_dlap_band", "accept_exact", "edp_dlap_high_part")
WINDOW_CAPS = Caps(10**13, 10**14)


@dataclass
class WorstPaths:
    regions: dict[str, int]       # region label -> instructions (prologue under edp_dlap_noisy)
    static: dict[str, int]
    product: dict[int, int]       # nchunks -> instructions
    less_than: dict[int, int]     # limbs -> instructions (every limb compared)
    refill: int
    prepare: dict[int, tuple[int, int]] = field(default_factory=dict)  # L -> (nchunks, instructions)

    def region(self, name: str) -> int:
        return self.regions[f"{LOOP}_{name}" if name else LOOP]

    def buffer(self) -> int:
        """The bit buffer stored to the generator and loaded back around a C slow path."""
        return self.region("flush") + self.region("load")

    def call(self) -> int:
        """edp_dlap_noisy's entry (a load) and exit (a flush), once per noise."""
        return self.region("") + self.region("exit") + self.buffer()

    def draw(self) -> int:
        return self.region("draw")

    def store(self) -> int:
        """Quantising one input and storing its noisy value, once per class."""
        return self.region("store")

    def accept(self) -> int:
        """Acceptance past the K fixed bits in the loop: the next bit and tier 1 of the band."""
        return self.region("accept")

    def accept_call(self) -> int:
        """The acceptance's C fallback, tier 1 (the exact product excluded)."""
        return self.buffer() + self.static["edp_dlap_accept_rest"] + self.static["edp_dlap_band"]

    def exact(self, nchunks: int) -> int:
        return self.static["accept_exact"] + self.product[nchunks] + self.less_than[2 * nchunks]

    def round(self) -> int:
        """One pass of edp_dlap_high_part (a tail round, its tie included)."""
        return self.static["edp_dlap_high_part"] + self.less_than[1]

    def high(self) -> int:
        """A tie or tail outcome in the fast table: the call and one pass."""
        return self.region("high") + self.buffer() + self.round()

    def refill_path(self) -> int:
        return self.region("refill") + self.refill


def _disasm(emu: Emulator, start: int, end: int) -> int:
    code = bytes(emu.uc.mem_read(start, end - start))
    cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
    return sum(1 for _ in cs.disasm(code, start))


def static_size(emu: Emulator, name: str) -> int:
    start, end = emu.image.function_range(name)
    return _disasm(emu, start, end)


def region_sizes(emu: Emulator) -> dict[str, int]:
    """Instructions from each label of edp_dlap_noisy to the next (the last to the function's end)."""
    start, end = emu.image.function_range(LOOP)
    addrs = [start] + [emu.image.symbol(n) & ~1 for n in REGIONS[1:]] + [end]
    if addrs != sorted(addrs):
        raise RuntimeError(f"{LOOP}'s region labels are out of order: {addrs}")
    return {n: _disasm(emu, a, b) for n, a, b in zip(REGIONS, addrs, addrs[1:])}


def _counted(emu: Emulator, name: str, *args: int) -> int:
    before = emu.count
    emu.call(name, *args)
    return emu.count - before


def _configure(emu: Emulator, cfg: int, log2_t: float) -> None:
    """epsilon 1, m = 20, k = 1 and sensitivity for t ~ 2^log2_t."""
    sens = 2.0 ** (log2_t - 20)
    emu.uc.mem_write(cfg, struct.pack("<Ifffi", MICRO, 0.0, 1.0, sens, 20))


def measure(elf: str | Path, max_chunks: int = 6) -> WorstPaths:
    emu = Emulator(elf)
    img = emu.image
    plan, cfg, limbs, rng = emu.scratch, emu.scratch + 0x2000, emu.scratch + 0x2400, emu.scratch + 0x2800
    dlap = plan + img.offset("edp_mech_plan_t", "dlap")
    r_block, r_word = img.offset("edp_drbg_t", "block"), img.offset("edp_drbg_t", "word")
    r_acc, r_nbits = img.offset("edp_drbg_t", "acc"), img.offset("edp_drbg_t", "nbits")

    def field_of(name: str) -> int:
        return struct.unpack("<I", emu.uc.mem_read(dlap + img.offset("edp_dlap_t", name), 4))[0]

    product: dict[int, int] = {}
    prepare: dict[int, tuple[int, int]] = {}  # L -> (nchunks, instructions)
    # every J = floor(log2 t) from 1 to 24 (L = J - 3 up to 21, 0 to 6 chunks)
    for J in range(1, 25):
        _configure(emu, cfg, J + 0.5)
        n = _counted(emu, "edp_mech_prepare", plan, cfg, 1)
        L, nc = field_of("L"), field_of("nchunks")
        prepare[L] = (nc, max(n, prepare.get(L, (nc, 0))[1]))
        if nc and nc not in product:
            product[nc] = _counted(emu, "product", dlap, (1 << L) - 1, limbs)
    if sorted(product) != list(range(1, max_chunks + 1)):
        raise RuntimeError(f"configurations gave chunks {sorted(product)}")
    # The last configuration has the most chunks: a keystream equal to its limbs, top limb first,
    # makes less_than compare every one.
    _configure(emu, cfg, 24.5)
    emu.call("edp_mech_prepare", plan, cfg, 1)
    emu.call("product", dlap, (1 << field_of("L")) - 1, limbs)
    less_than = {}
    n_max = 2 * max_chunks
    words = struct.unpack(f"<{n_max}I", emu.uc.mem_read(limbs, 4 * n_max))
    for n in range(1, n_max + 1):
        emu.uc.mem_write(rng + r_block + 4 * 8, struct.pack(f"<{n}I", *reversed(words[:n])))
        emu.uc.mem_write(rng + r_word, struct.pack("<I", 8))
        emu.uc.mem_write(rng + r_acc, bytes(8))
        emu.uc.mem_write(rng + r_nbits, bytes(4))
        less_than[n] = _counted(emu, "less_than", rng, limbs, n, 0)
    refill = _counted(emu, "edp_drbg_next_block", rng)
    static = {f: static_size(emu, f) for f in SLOW}
    return WorstPaths(region_sizes(emu), static, product, less_than, refill, prepare)


def firmware_constants(source: str | Path) -> dict[str, int]:
    """The #define'd integer constants of a C file (deadline.c, deadline.h, a board.c)."""
    out = {}
    for line in Path(source).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "#define" and parts[2].rstrip("u").isdigit():
            out[parts[1]] = int(parts[2].rstrip("u"))
    return out


@dataclass
class Window:
    """Measured windows of one kind of request: the largest work, its split, and the deadline."""

    work: int = 0          # instructions from window_open to window_close, the largest seen
    noise: int = 0         # the noise's share of the largest work (edp_dlap_noisy and its callees)
    rest: int = 0          # the largest non-noise part (everything else in the window)
    deadline: int = 0      # the window's bound (edp_dev_t.window_insns, the device state)
    runs: int = 0

    def add(self, work: int, noise: int, deadline: int) -> None:
        if work > self.work:
            self.work, self.noise = work, noise
        self.rest = max(self.rest, work - noise)
        self.deadline = deadline
        self.runs += 1

    def as_dict(self) -> dict:
        return {"work": self.work, "noise": self.noise, "rest": self.rest, "deadline": self.deadline,
                "runs": self.runs}


class WindowProbe:
    """The production timing image in Unicorn with a device client: the work and the deadline of
    each answer's window."""

    def __init__(self, elf: str | Path, model: bool = False):
        self.emu = Emulator(elf)
        if model:
            self.emu.install_model()
        self.opens, self.closes = self.emu.watch("window_open"), self.emu.watch("window_close")
        self.noise_in, self.noise_out = self.emu.watch(LOOP), self.emu.watch("edp_mech_output")
        self.dev = Device(TraceLink(self.emu), timeout=60)
        self._insns = self.emu.device + self.emu.image.offset("edp_dev_t", "window_insns")
        self._blocks = self.emu.device + self.emu.image.offset("edp_dev_t", "drbg") + \
            self.emu.image.offset("edp_drbg_t", "blocks_since_seed")

    def configure(self, cfg: MechConfig) -> None:
        self.dev.configure(load_key(), cfg, WINDOW_CAPS)

    def force_reseed(self) -> None:
        """The next charge reseeds (the longest fixed part)."""
        self.emu.uc.mem_write(self._blocks, struct.pack("<I", 0xFFFFFFFF))

    def run(self, call, into: Window) -> None:
        n_open, n_in = len(self.opens), len(self.noise_in)
        call(self.dev)
        work = self.closes[-1] - self.opens[-1]
        noise = self.noise_out[-1] - self.noise_in[-1] if len(self.noise_in) > n_in else 0
        deadline = struct.unpack("<I", self.emu.uc.mem_read(self._insns, 4))[0]
        if len(self.opens) == n_open:
            raise RuntimeError("no window was opened")
        into.add(work, noise, deadline)


def query_windows(elf: str | Path, configs: list[tuple[float, int]], queries: int, seed: int = 1,
                  mode: str = "full", mech: Callable[[float], MechConfig] | None = None,
                  inputs: Callable[[int], np.ndarray] | None = None) -> dict[tuple[float, int], dict]:
    """(epsilon, k) -> {"first": the first query after the CONFIG (it prepares the plan),
    "warm": `queries` more, the first of them with a forced reseed, "noise_bound": the plan's
    noise bound (edp_mech_plan_t.noise_insns)}. `mech(epsilon)` gives the configuration
    (default: sensitivity 1 on [0, 1]) and `inputs(k)` each query's vector (default: uniform on
    [0, 1))."""
    from ..mech.lattice import to_micro
    probe = WindowProbe(elf)
    rng = np.random.default_rng(seed)
    mech = mech or (lambda eps: MechConfig(to_micro(eps), 0.0, 1.0, 1.0, None))
    inputs = inputs or (lambda k: rng.random(k, dtype=np.float32))
    out = {}
    for eps in sorted({e for e, _ in configs}):
        for k in [k for e, k in configs if e == eps]:
            probe.configure(mech(eps))
            first, warm = Window(), Window()
            probe.run(lambda d: d.query(inputs(k), mode), first)
            for i in range(queries):
                if i == 0:
                    probe.force_reseed()
                probe.run(lambda d: d.query(inputs(k), mode), warm)
            out[(eps, k)] = {"first": first.as_dict(), "warm": warm.as_dict(),
                             "noise_bound": _noise_bound(probe, "plan")}
    return out


def infer_windows(elf: str | Path, images: np.ndarray, mode: str = "label", epsilon: float = 1.0) -> dict:
    """The first INFER after a CONFIG (the plan prepared) and one per further image; with the
    plan's noise bound (`noise_bound`, edp_mech_plan_t.noise_insns)."""
    from ..mech.lattice import to_micro
    probe = WindowProbe(elf, model=True)
    probe.configure(MechConfig(to_micro(epsilon), 0.0, 1.0, 1.0, None))
    first, warm = Window(), Window()
    probe.run(lambda d: d.infer(images[0], mode), first)
    for i, x in enumerate(images[1:]):
        if i == 0:
            probe.force_reseed()
        probe.run(lambda d, x=x: d.infer(x, mode), warm)
    return {"first": first.as_dict(), "warm": warm.as_dict(), "noise_bound": _noise_bound(probe, "infer_plan")}


def _noise_bound(probe: WindowProbe, plan_field: str) -> int:
    """The noise part of the release deadline of the device's cached plan (`plan` for QUERY,
    `infer_plan` for INFER): edp_mech_plan_t.noise_insns, set when the plan was prepared."""
    img = probe.emu.image
    plan = probe.emu.device + img.offset("edp_dev_t", plan_field)
    return struct.unpack("<I", probe.emu.uc.mem_read(plan + img.offset("edp_mech_plan_t", "noise_insns"), 4))[0]


def optimum_estimate(window: dict, noise_bound: int) -> float:
    """The best fixed deadline's estimate for a window (issue 22): its measured work outside the
    noise, and the noise bound with the measured path costs (each draw its fast path, the slow
    paths with their own tails) in place of the constants, which are at least MARGIN (1.25)
    times those costs: noise_bound / 1.25 at most."""
    return window["rest"] + noise_bound / 1.25


@dataclass
class S8Paths:
    """Per-unit instructions of the int8 kernels (edp_model_run_s8, model_s8.c), each the largest
    over the data paths (the input's three quantisation branches, the requantisation's three
    clamps): what deadline.c's EDP_DL_S8_* constants must cover."""

    call: float     # per model: the function's entry, exit and the zeroing of two outputs
    input: float    # per input feature: its quantisation
    net: float      # per net: its loop, the head on two classes, one output pair of the last layer
    layer: float    # per layer: the call and set-up (its widening's included)
    word: float     # per 4 inputs widened into int16 pairs
    mac8: float     # per weight word of an output pair: 8 multiply-adds (SXTB16, SMLAD)
    hidden: float   # per output of a hidden layer (outputs rounded up to even): requantisation
    last: float     # per output of the last layer beyond the first pair: dequantisation, the head, the zeroing


# Synthetic int8 nets: (features, hidden layer widths, last layer width = classes, nets).
S8Shape = tuple[int, tuple[int, ...], int, int]
S8_SHAPES: list[S8Shape] = [(f, hidden, c, nets) for nets in (1, 2) for f, hidden in
             ((4, ()), (5, ()), (8, ()), (16, ()), (4, (4,)), (8, (4,)), (4, (8,)), (12, (6,)),
              (4, (2, 6)), (8, (10, 4)), (16, (16,)))
             for c in ((2, 4) if nets == 1 else (2,))]


def _layout_s8(emu: Emulator, proto: int, shape: S8Shape, bias: int, x_value: float) -> int:
    """An int8 model in the scratch buffer with the given shape, all weights 0 (every hidden
    accumulator is `bias`, every logit 0), the image's own model `proto` for the rest; the input
    x_value everywhere (quantised with in_mul 100, in_add 0). Returns the model's address."""
    img, uc = emu.image, emu.uc
    f, hidden, c, n_nets = shape
    base = emu.scratch
    model, s8, nets, layers, data = base, base + 0x80, base + 0x100, base + 0x200, base + 0x400
    act, xp, flt, x = base + 0x2000, base + 0x2400, base + 0x2800, base + 0x3000
    uc.mem_write(model, bytes(uc.mem_read(proto, img.offset("edp_model_t", "__size__"))))

    def put(addr: int, struct_name: str, member: str, fmt: str, value: float) -> None:
        uc.mem_write(addr + img.offset(struct_name, member), struct.pack("<" + fmt, value))

    def alloc(blob: bytes) -> int:
        nonlocal data
        addr, data = data, (data + len(blob) + 3) & ~3
        uc.mem_write(addr, blob)
        return addr

    for name, fmt, value in (("head", "B", 1), ("n_features", "H", f), ("n_classes", "H", c),
                             ("n_nets", "H", n_nets), ("scratch", "I", flt), ("s8", "I", s8)):
        put(model, "edp_model_t", name, fmt, value)
    widths = [f, *hidden, c]
    put(s8, "edp_model_s8_t", "in_mul", "f", 100.0)
    put(s8, "edp_model_s8_t", "in_add", "f", 0.0)
    put(s8, "edp_model_s8_t", "nets", "I", nets)
    put(s8, "edp_model_s8_t", "hidden_row", "H", max([(h + 3) & ~3 for h in hidden], default=0))
    put(s8, "edp_model_s8_t", "act", "I", act)
    put(s8, "edp_model_s8_t", "xp", "I", xp)
    net_size, layer_size = img.offset("edp_net_s8_t", "__size__"), img.offset("edp_dense_s8_t", "__size__")
    cls = alloc(struct.pack(f"<{c}H", *range(c)))
    for t in range(n_nets):
        first = layers + t * len(widths[1:]) * layer_size
        for j, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
            lay = first + j * layer_size
            last = j == len(widths) - 2
            put(lay, "edp_dense_s8_t", "in", "H", n_in)
            put(lay, "edp_dense_s8_t", "out", "H", n_out)
            put(lay, "edp_dense_s8_t", "wt", "I", alloc(bytes(n_out * ((n_in + 3) & ~3))))
            put(lay, "edp_dense_s8_t", "b", "I", alloc(struct.pack(f"<{n_out}i", *[0 if last else bias] * n_out)))
            put(lay, "edp_dense_s8_t", "mult", "I", 0 if last else alloc(struct.pack(f"<{n_out}i", *[1 << 30] * n_out)))
            put(lay, "edp_dense_s8_t", "shift", "I", 0 if last else alloc(bytes([40] * n_out)))
            put(lay, "edp_dense_s8_t", "scale", "I", alloc(struct.pack(f"<{n_out}f", *[1.0] * n_out)) if last else 0)
        net = nets + t * net_size
        put(net, "edp_net_s8_t", "n_layers", "H", len(widths) - 1)
        put(net, "edp_net_s8_t", "layers", "I", first)
        put(net, "edp_net_s8_t", "cls", "I", cls)
    uc.mem_write(x, struct.pack(f"<{f}f", *[x_value] * f))
    return model


def _s8_features(shape: S8Shape) -> list[int]:
    f, hidden, c, n_nets = shape
    widths = [f, *hidden, c]
    row = [(n + 3) // 4 for n in widths[:-1]]
    pairs = [(n + 1) // 2 for n in widths[1:]]
    # the input is widened for every layer but a first one right after another first one (nets
    # without hidden layers share the widened input)
    widened, widening = (n_nets * sum(row), n_nets * len(row)) if hidden else (row[0], 1)
    return [1, f, n_nets, n_nets * len(row), widened, n_nets * 2 * sum(pairs[:-1]),
            2 * (pairs[-1] - 1), n_nets * sum(p * r for p, r in zip(pairs, row)), widening,
            0 if hidden else n_nets]


def measure_s8(elf: str | Path) -> S8Paths:
    """Fit edp_model_run_s8's instructions on synthetic int8 models (S8_SHAPES) to the per-unit
    costs, for each data path: inputs quantised to the middle, below 0 and above 255, hidden
    accumulators requantised to the middle, below -128 and above 127. The code has no other
    data-dependent branch, so each fit must be exact (residual below one instruction)."""
    emu = Emulator(elf)
    proto = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    X = np.array([_s8_features(s) for s in S8_SHAPES], dtype=float)
    best = np.zeros(X.shape[1])
    for bias in (1 << 17, 1 << 30, -(1 << 30)):       # y in range, above 127, below -128
        for x_value in (0.5, -1.0, 3.0):               # v = 50, v < 0, v >= 255
            y = []
            for shape in S8_SHAPES:
                m = _layout_s8(emu, proto, shape, bias, x_value)
                y.append(_counted(emu, "edp_model_run_s8", m, emu.scratch + 0x3000))
            coef, *_ = np.linalg.lstsq(X, np.array(y, dtype=float), rcond=None)
            if np.max(np.abs(X @ coef - y)) > 0.5:
                raise RuntimeError(f"edp_model_run_s8 is not linear in the shape (bias {bias}, x {x_value})")
            best = np.maximum(best, coef)
    # exact fits: whole instructions, halves per output (a pair's cost over its two outputs)
    call, inp, net, layer, word, hidden, last, mac8, widening, single = (float(v) for v in np.round(2 * best) / 2)
    return S8Paths(call, inp, net + max(single, 0.0), layer + widening, word, mac8, hidden, last)


def head_per_class(elf: str | Path) -> dict[str, float]:
    """edp_model_head's instructions per class, by head ("votes", "softmax"), on logits that
    rise with the class (the argmax moves at every one: its longest path): the difference
    between 12 and 2 classes over 10."""
    emu = Emulator(elf)
    proto = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    m, cls, z, out = emu.scratch, emu.scratch + 0x100, emu.scratch + 0x200, emu.scratch + 0x300
    emu.uc.mem_write(m, bytes(emu.uc.mem_read(proto, emu.image.offset("edp_model_t", "__size__"))))
    emu.uc.mem_write(cls, struct.pack("<12H", *range(12)))
    emu.uc.mem_write(z, struct.pack("<12f", *[0.25 * j for j in range(12)]))
    res = {}
    for name, head in (("softmax", 0), ("votes", 1)):
        emu.uc.mem_write(m + emu.image.offset("edp_model_t", "head"), bytes([head]))
        n = {}
        for k in (2, 12):
            emu.uc.mem_write(out, bytes(48))
            n[k] = _counted(emu, "edp_model_head", m, cls, z, k, out)
        res[name] = (n[12] - n[2]) / 10
    return res


@dataclass
class NonfinitePaths:
    """answer.c's finite_output, on every INFER: what EDP_DL_NONFINITE and EDP_DL_NONFINITE_CLASS
    must cover."""

    run: dict[int, int]   # n_classes -> instructions, the last output NaN (the check's longest, then the fill)
    site: int             # its call site: from the previous call's return to the BL, and the result's move

    def cost(self, n: int) -> int:
        return self.run[n] + self.site


NONFINITE_CLASSES = (*range(1, 33), 100, 1000)


def nonfinite_paths(elf: str | Path, classes: tuple[int, ...] = NONFINITE_CLASSES) -> NonfinitePaths:
    """finite_output(m, y) under Unicorn on a copy of the image's model with n_classes patched, y
    finite but for its last value (the check runs through every value, then the fixed vector is
    stored), for every n in classes; checked to return the model's scratch, holding
    lo + (hi - lo) / n. Its call site is counted from the disassembly of its only caller."""
    emu = Emulator(elf)
    img, uc = emu.image, emu.uc
    proto = struct.unpack("<I", uc.mem_read(img.symbol("edp_app_model"), 4))[0]
    m, y, out = emu.scratch, emu.scratch + 0x100, emu.scratch + 0x1100
    uc.mem_write(m, bytes(uc.mem_read(proto, img.offset("edp_model_t", "__size__"))))
    uc.mem_write(m + img.offset("edp_model_t", "scratch"), struct.pack("<I", out))
    lo, hi = (struct.unpack("<f", uc.mem_read(m + img.offset("edp_model_t", f), 4))[0] for f in ("lo", "hi"))
    run = {}
    for n in classes:
        uc.mem_write(m + img.offset("edp_model_t", "n_classes"), struct.pack("<H", n))
        v = np.full(n, 0.5, np.float32)
        v[-1] = np.nan
        uc.mem_write(y, v.tobytes())
        before = emu.count
        if emu.call("finite_output", m, y) != out:
            raise RuntimeError("finite_output did not return the fixed vector for a NaN output")
        run[n] = emu.count - before
        fixed = np.float32(lo) + (np.float32(hi) - np.float32(lo)) / np.float32(n)
        if not np.array_equal(np.frombuffer(bytes(uc.mem_read(out, 4 * n)), np.float32), np.full(n, fixed)):
            raise RuntimeError(f"finite_output's fixed vector for {n} classes is not lo + (hi - lo) / n")
    return NonfinitePaths(run, _call_site(emu, "finite_output"))


def _call_site(emu: Emulator, callee: str) -> int:
    """Instructions around the only BL to callee: from the return of the call before it (the
    argument set-up) to the BL, and the move of the result after it."""
    target = emu.image.symbol(callee) & ~1
    cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
    sites = []
    for name, (addr, size, _) in emu.image.symbols.items():
        if not size or name == callee or not (addr & 1):
            continue
        start = addr & ~1
        insns = list(cs.disasm(bytes(emu.uc.mem_read(start, size)), start))
        for i, ins in enumerate(insns):
            if ins.mnemonic == "bl" and ins.op_str == f"#{target:#x}":
                j = i
                while j > 0 and insns[j - 1].mnemonic not in ("bl", "blx"):
                    j -= 1
                sites.append(i - j + 2)
    if len(sites) != 1:
        raise RuntimeError(f"{callee} has {len(sites)} call sites, not one")
    return sites[0]
