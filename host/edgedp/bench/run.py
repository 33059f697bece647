"""``edgedp bench``: cost of the exact DP step against the naive baseline, as k grows.

For every epsilon the device is reconfigured (authenticated CONFIG, large daily cap); for
every k one warm-up query builds the per-(configuration, k) table (the plan cache in
answer.c; set-up is not part of the measured step), then ``n`` queries and ``n`` NAIVE
runs of the same vector are measured:

- ``dp_instructions`` / ``naive_instructions``: the QUERY/NAIVE ``ticks`` of the target
  converted by :mod:`edgedp.bench.icount` (QEMU -icount: SysTick ticks / 1.344);
- ``est_cycles`` / ``est_us_168mhz``: the same frames replayed on the same ELF in Unicorn
  (:mod:`edgedp.bench.trace`), every executed instruction weighted with the Cortex-M4
  timing of ARM DDI 0439B Table 3-1 (zero flash wait states: see ``timing``); when the
  target is the QEMU test image both run in lockstep from the same boot state, so every
  query's trace count must equal its ticks / 1.344 (``conversion_max_error``);
- the share of each part of the step (ChaCha12 block, DRBG buffer, sampler, mechanism)
  and of the whole frame (framing: COBS, CRC, budget commit, response) from the trace;
- ``keystream_bits`` read per query (the trace's DRBG position) and ``dp_per_class_amortised``:
  the step with the keystream batches that fell inside the measured queries replaced by the
  bits they read at the batch's cost per bit, the figure the per-class targets use;
- ``queries_per_second``: end-to-end QUERY round trips through the UART link;
- with ``c_loop``: the same DP queries traced on the test image whose sampling loop is the
  portable C one (build/qemu-cloop/edgedp.elf), ``c_loop_per_class_amortised`` beside the
  Thumb-2 loop's ``dp_per_class_amortised`` and ``asm_loop_reduction`` (1 - Thumb-2 / C);
- the host reference's bit-exact and vectorised samples per second, and the footprint.
"""
from __future__ import annotations

import datetime
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..version import __version__
from ..device.client import Device, connect, load_key, timeout_or
from ..device.errors import EdgeDPError
from ..device.protocol import Caps, MechConfig, SampleRequest
from ..device.targets import start_target
from ..mech.lattice import to_micro
from ..paths import build_dir, project_root
from . import icount, timing

KS = (1, 10, 100, 1000)
EPSILONS = (0.1, 1.0, 10.0)
DEFAULT_QUERIES = {1: 60, 10: 60, 100: 12, 1000: 4}
QUICK_QUERIES = {1: 8, 10: 8, 100: 3, 1000: 1}
SENSITIVITY = 2.0
BENCH_CAPS = Caps(daily=10**12)
"""10^6 epsilon a day: no benchmark run exhausts it."""
TARGET_K10_US = 100.0
TARGET_K1000_PER_CLASS = 150.0
TARGET_K10_NAIVE = 0.8            # issue 22: the DP step at most 0.8x the naive sampler at k = 10
TARGET_ENTROPY_RATIO = 2.5        # issue 22's 2.5x the entropy limit: informational since issue 42
TARGET_DEADLINE_RATIO = 2.0      # issue 22: QUERY's release deadline within 2x the optimum, k >= 10
TARGET_FLASH = 8 * 1024
"""The DP core's flash budget in bytes (drbg, dlap, mech, budget as linked in the production image):
the one statement of the limit; bench's targets and tests/firmware/test_trace.py read it."""
TARGET_RAM = 1024
"""The DP core's RAM budget in bytes, besides the per-configuration p_j table."""
TARGET_ASM_REDUCTION = 0.10       # issue 38 item 9: hand-written assembly only if 10 % below C
# Issue 42's targets, each against the figures of docs/benchmarks.md at e2d3e4cb1623 ("today's"),
# per (k, epsilon) point of the grid; a point outside these tables is not judged by them.
TARGET_BITS_OVER_H = 3.0          # keystream bits per sample at most H + 3 (k >= 10)
TARGET_DP_STEP_RATIO = 0.75       # the DP step, amortised per class, at most 0.75x today's (k >= 10)
TARGET_FRAMING_K1000 = 60.0       # QUERY framing at most 60 instructions per class at k = 1000
TARGET_DEADLINE_42_RATIO = 0.8    # the QUERY release deadline at most 0.8x today's (k >= 10)
TODAY_DP_PER_CLASS = {(10, 0.1): 100.7, (10, 1.0): 97.8, (10, 10.0): 90.9,
                      (100, 0.1): 100.2, (100, 1.0): 95.9, (100, 10.0): 86.7,
                      (1000, 0.1): 103.9, (1000, 1.0): 98.6, (1000, 10.0): 91.9}
"""The DP step's amortised instructions per class at e2d3e4cb1623 (issue 42 item 2)."""
TODAY_DEADLINE = {(10, 0.1): 35_288, (10, 1.0): 37_187, (10, 10.0): 35_877,
                  (100, 0.1): 90_426, (100, 1.0): 87_239, (100, 10.0): 82_090,
                  (1000, 0.1): 503_128, (1000, 1.0): 493_007, (1000, 10.0): 465_285}
"""QUERY's release deadline in instructions at e2d3e4cb1623 (issue 42 item 4)."""
C_LOOP_IMAGE = "qemu-cloop"       # the test image with the portable C sampling loop (Makefile)
STEP_PARTS = ("chacha", "drbg", "sampler", "mechanism", "timer")


@dataclass
class BenchConfig:
    ks: tuple[int, ...] = KS
    epsilons: tuple[float, ...] = EPSILONS
    queries: dict[int, int] = field(default_factory=lambda: dict(DEFAULT_QUERIES))
    trace: bool = True
    deadline: bool = True
    footprint: bool = True
    reference_samples: int = 20000
    key_file: str | None = None
    c_loop: bool = False
    seed: int = 1


def bench_input(k: int, seed: int) -> np.ndarray:
    """A softmax-like probability vector (the typical query)."""
    rng = np.random.default_rng(seed + k)
    z = rng.normal(0.0, 2.0, k)
    p = np.exp(z - z.max())
    return (p / p.sum()).astype(np.float32)


def git_commit() -> str:
    root = project_root()
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class _Tracer:
    """The same firmware in Unicorn, driven with the same frames as the target (``image``: the
    QEMU test image, or another build of it such as ``qemu-cloop``)."""

    def __init__(self, image: str = "qemu") -> None:
        from ..device.targets.qemu import ensure_image
        from .trace import Emulator, TraceLink
        self.elf = ensure_image(image)
        self.emu = Emulator(self.elf)
        self.dev = Device(TraceLink(self.emu), timeout=60.0)

    def run(self, fn):
        """Call fn(device); return (its result, the measured steps, instructions of the whole frame)."""
        self.emu.steps()
        c0 = self.emu.count
        out = fn(self.dev)
        return out, self.emu.steps(), self.emu.count - c0


def _mean(v: Sequence[float | None]) -> float | None:
    xs = [x for x in v if x is not None]
    return float(np.mean(xs)) if xs else None


def reference_rates(n: int, epsilon: float = 1.0, k: int = 1000) -> dict:
    """Samples per second of the bit-exact Python reference and of the vectorised sampler."""
    from ..mech.fast import noisy_lattice
    from ..mech.reference import ReferenceDevice
    ref = ReferenceDevice(MechConfig(to_micro(epsilon)))
    t0 = time.perf_counter()
    ref.sample(SampleRequest(to_micro(epsilon), SENSITIVITY, k, n))
    t_ref = time.perf_counter() - t0
    rows = max(1, 1_000_000 // k)
    x = np.tile(bench_input(k, 0), (rows, 1))
    t0 = time.perf_counter()
    noisy_lattice(x, epsilon, SENSITIVITY, rng=np.random.default_rng(0))
    t_fast = time.perf_counter() - t0
    return {"reference_samples_per_second": n / t_ref, "reference_samples": n,
            "fast_samples_per_second": rows * k / t_fast, "fast_samples": rows * k,
            "epsilon": epsilon, "k": k}


class Partial(Exception):
    """The run stopped early: asked to (``stop``, Ctrl-C), or on a device error (``cause``).
    ``result`` holds what was measured, marked by :func:`mark_partial`."""

    def __init__(self, result: dict, cause: EdgeDPError | None):
        super().__init__(result.get("stopped", "stopped"))
        self.result, self.cause = result, cause


class _Stop(Exception):
    """Raised between two queries when the run is asked to stop: the row in progress is dropped."""


def part_error(name: str, exc: Exception) -> EdgeDPError:
    """What stopped the bench in its part ``name``: a device error as it is, anything else named
    with the part and its type (ERR_BENCH)."""
    return exc if isinstance(exc, EdgeDPError) else EdgeDPError(f"{name}: {type(exc).__name__}: {exc}", "ERR_BENCH")


def mark_partial(result: dict, stopped: str, skipped: str | None = None) -> None:
    """Mark result as partial: why it stopped (the first reason is kept), and a part not run
    (``missing``, the grid points not measured, is set by :func:`run`; none by default)."""
    result["partial"] = True
    result.setdefault("stopped", stopped)
    result.setdefault("missing", [])
    result.setdefault("skipped", [])
    if skipped:
        result["skipped"].append(skipped)


def _never() -> bool:
    return False


def run(target: str | None = None, cfg: BenchConfig | None = None, progress=None,
        stop: Callable[[], bool] = _never) -> dict:
    """Run the benchmark; returns the JSON-ready result (see docs/benchmarks.md).

    ``stop()`` is polled between queries: once it is true (or a device error ends the grid) the
    row in progress is dropped, the later parts are not run and :class:`Partial` is raised with
    the rows measured so far, ``partial``, ``missing`` (the (k, epsilon) points not measured),
    ``skipped`` and ``stopped``. A failed Unicorn replay during the grid, or any error in a
    later part (deadlines, entropy limits, host reference, footprint), ends the run the same way
    with that error as the cause."""
    from .trace import TraceError
    cfg = cfg or BenchConfig()
    say = progress or (lambda msg: None)
    grid = [(eps, k) for eps in cfg.epsilons for k in cfg.ks]
    cause: EdgeDPError | None = None
    stopped: str | None = None
    t_handle = start_target(target)
    try:
        dev = connect(t_handle, timeout=timeout_or(60.0), sync_timeout=timeout_or(20.0))
        info = dev.require_test_build("bench")
        unit = icount.tick_unit(info, t_handle.name)
        key = load_key(cfg.key_file)
        dev.set_time_if_unset(key)
        tracer = _Tracer() if cfg.trace else None
        ctracer = _Tracer(C_LOOP_IMAGE) if cfg.c_loop and tracer else None  # two traces, or none
        lockstep = tracer is not None and t_handle.name == "qemu"
        rows: list[dict] = []
        try:
            for eps in cfg.epsilons:
                if stop():
                    raise _Stop
                say(f"epsilon {eps:g}: configure")
                mech = MechConfig(to_micro(eps))
                dev.configure(key, mech, BENCH_CAPS)
                for t in (tracer, ctracer):
                    if t:
                        t.run(lambda d, mech=mech: d.configure(key, mech, BENCH_CAPS))
                for k in cfg.ks:
                    if stop():  # before the next point's warm-up query
                        raise _Stop
                    say(f"epsilon {eps:g}, k {k}")
                    rows.append(_measure(dev, tracer, unit, lockstep, k, eps,
                                         cfg.queries.get(k, 3), cfg.seed, stop, ctracer))
                    say(f"epsilon {eps:g}, k {k}: measured ({len(rows)} of {len(grid)} points)")
        except _Stop:
            stopped = "interrupted"
        except EdgeDPError as exc:  # the rows measured so far are kept
            cause, stopped = exc, str(exc)
        except TraceError as exc:  # the Unicorn replay failed: the rows so far are kept too
            cause = EdgeDPError(f"trace: {exc}", "ERR_BENCH")
            stopped = str(cause)
        result = {
            "tool": f"edgedp {__version__} bench",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(),
            "target": t_handle.name,
            "board": info.board,
            "firmware": info.firmware_version,
            "build": info.build,
            "tick": {"kind": unit.kind, "hz": unit.hz, "emulated": unit.emulated,
                     "ticks_per_instruction": unit.ticks_per_instruction, "meaning": unit.describe()},
            "trace": {"elf": str(tracer.elf.relative_to(project_root())) if tracer else None,
                      "c_loop_elf": str(ctracer.elf.relative_to(project_root())) if ctracer else None,
                      "lockstep": lockstep, "timing": "ARM DDI 0439B Table 3-1 (Cortex-M4 TRM r0p1)",
                      "pipeline_refill": timing.P_NOMINAL,
                      "flash_wait_states_168mhz": timing.FLASH_WAIT_STATES_168MHZ,
                      "assumption": "zero flash wait states (ART accelerator hits); est_cycles_hi charges "
                                    "5 wait states per taken branch and flash load, P = 3"},
            "warm_up": "one query per (epsilon, k) builds the table before measuring",
            "rows": rows,
        }
    finally:
        t_handle.close()
    if stopped is not None:
        mark_partial(result, stopped)
        result["missing"] = [{"k": k, "epsilon": eps} for eps, k in grid[len(rows):]]
    parts = [("deadlines", cfg.deadline, "release deadlines (production timing image, Unicorn)",
              lambda: _add_deadlines(rows, cfg)),
             ("entropy limits", tracer is not None, None,
              lambda: _add_entropy_limits(rows, tracer.elf, ctracer.elf if ctracer else None) if tracer else None),
             ("host reference", True, "host reference rates",
              lambda: result.update(host=reference_rates(cfg.reference_samples))),
             ("footprint", cfg.footprint, "footprint", lambda: result.update(footprint=_footprint()))]
    for name, wanted, msg, part in parts:
        if not wanted:
            continue
        if stopped is None and stop():
            stopped = "interrupted"
        if stopped is not None:
            mark_partial(result, stopped, name)
            continue
        if msg:
            say(msg)
        try:
            part()
        except Exception as exc:  # noqa: BLE001 - the rows measured so far are kept, the error said
            cause = part_error(name, exc)
            stopped = str(cause)
            mark_partial(result, stopped, name)
    result["targets"] = check_targets(result)
    if stopped is not None:
        raise Partial(result, cause)
    return result


def _footprint() -> dict:
    from .footprint import FootprintError, measure
    try:
        return measure().as_dict()
    except (FootprintError, EdgeDPError) as exc:
        return {"error": str(exc)}


@dataclass
class _Runs:
    """Repeated measurements of one kind (DP queries or NAIVE runs) at one (epsilon, k)."""

    ticks: list[int] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    steps: list = field(default_factory=list)          # the traced step of each run
    frames: list[int] = field(default_factory=list)    # traced instructions of each whole frame
    errors: list[float] = field(default_factory=list)  # ticks converted minus traced instructions (lockstep)


def _same_answer(r, r2) -> None:
    if not np.array_equal(r.lattice, r2.lattice):
        raise EdgeDPError("QEMU and the Unicorn trace disagree on a query's output: "
                          "the lockstep replay is out of sync", "ERR_BENCH")


def _dp_queries(dev: Device, tracer: _Tracer | None, unit: icount.TickUnit, lockstep: bool, x: np.ndarray,
                n: int, stop: Callable[[], bool],
                ctracer: _Tracer | None = None) -> tuple[_Runs, int | None, list]:
    """n measured queries after one warm-up (which builds the table); returns the runs, the
    traced instructions of the warm-up frame and the steps of the same queries on ``ctracer``
    (the C loop's image: its answers must be the Thumb-2 trace's, bit for bit)."""
    dev.query(x)
    setup_frame = tracer.run(lambda d: d.query(x))[2] if tracer else None
    if ctracer:
        ctracer.run(lambda d: d.query(x))
    c_steps: list = []
    runs = _Runs()
    for _ in range(n):
        if stop():
            raise _Stop
        t0 = time.perf_counter()
        r = dev.query(x)
        runs.walls.append(time.perf_counter() - t0)
        assert r.ticks is not None  # parse_query reads it from every answer
        runs.ticks.append(r.ticks)
        if tracer:
            r2, steps, frame = tracer.run(lambda d: d.query(x))
            runs.steps.append(steps[-1])
            runs.frames.append(frame)
            if lockstep:
                _same_answer(r, r2)
                runs.errors.append(unit.counted_instructions(r.ticks) - steps[-1].instructions)
            if ctracer:
                r3, csteps, _ = ctracer.run(lambda d: d.query(x))
                if not np.array_equal(r2.lattice, r3.lattice):
                    raise EdgeDPError("the C loop's image and the Thumb-2 one disagree on a query's output",
                                      "ERR_BENCH")
                c_steps.append(csteps[-1])
    return runs, setup_frame, c_steps


def _naive_runs(dev: Device, tracer: _Tracer | None, unit: icount.TickUnit, lockstep: bool, x: np.ndarray,
                scale: float, n: int, stop: Callable[[], bool]) -> _Runs:
    """n runs of the insecure rand()+logf baseline (test builds)."""
    runs = _Runs()
    for _ in range(n):
        if stop():
            raise _Stop
        t = dev.naive(x, scale).ticks
        runs.ticks.append(t)
        if tracer:
            _, steps, _ = tracer.run(lambda d: d.naive(x, scale))
            runs.steps.append(steps[-1])
            if lockstep:
                runs.errors.append(unit.counted_instructions(t) - steps[-1].instructions)
    return runs


def _measured(unit: icount.TickUnit, dp: _Runs, naive: _Runs) -> dict:
    """What the device's own tick counter says."""
    return {
        "dp_ticks": _mean(dp.ticks),
        "dp_instructions": _mean([unit.instructions(t) for t in dp.ticks]),
        "dp_cycles_measured": _mean([unit.cycles(t) for t in dp.ticks]),
        "dp_us_measured": _mean([s * 1e6 for s in map(unit.seconds, dp.ticks) if s is not None])
        if not unit.emulated or unit.emulator == "renode" else None,
        "naive_ticks": _mean(naive.ticks),
        "naive_instructions": _mean([unit.instructions(t) for t in naive.ticks]),
        "naive_cycles_measured": _mean([unit.cycles(t) for t in naive.ticks]),
        "queries_per_second": 1.0 / float(np.mean(dp.walls)),
    }


def _traced(dp: _Runs, naive: _Runs, setup_frame: int | None, k: int, lockstep: bool) -> dict:
    """What the instruction trace says: counts, cycle estimates, where the instructions go."""
    steps = dp.steps
    cyc, cyc_hi = float(np.mean([s.cycles for s in steps])), float(np.mean([s.cycles_hi for s in steps]))
    row: dict = {
        "trace_instructions": _mean([s.instructions for s in steps]),
        "est_cycles": cyc,
        "est_cycles_lo": _mean([s.cycles_lo for s in steps]),
        "est_cycles_hi": cyc_hi,
        "est_us_168mhz": cyc / (timing.CORE_HZ / 1e6),
        "est_us_168mhz_hi": cyc_hi / (timing.CORE_HZ / 1e6),
        "naive_trace_instructions": _mean([s.instructions for s in naive.steps]),
        "naive_est_cycles": _mean([s.cycles for s in naive.steps]),
        "frame_instructions": _mean(dp.frames),
        "setup_frame_instructions": setup_frame,
        "chacha_blocks": _mean([s.chacha_blocks for s in steps]),
        # None if a reseed fell inside a step (the position restarts): no amortised figures then
        "keystream_bits": None if any(s.keystream_bits is None for s in steps)
        else _mean([s.keystream_bits for s in steps]),
    }
    parts: Counter = Counter()
    for s in steps:
        parts.update(s.categories)
    total = sum(parts.values()) or 1
    row["breakdown"] = {p: parts.get(p, 0) / len(steps) / k for p in STEP_PARTS}
    row["breakdown"]["other"] = (total - sum(parts.get(p, 0) for p in STEP_PARTS)) / len(steps) / k
    row["framing_instructions"] = row["frame_instructions"] - row["trace_instructions"]
    if lockstep:
        errors = dp.errors + naive.errors
        row["conversion_max_error"] = float(max(abs(e) for e in errors)) if errors else None
    return row


def _per_class(row: dict, k: int) -> dict:
    """Instructions per class of the DP step and of the baseline (measured, else traced)."""
    dp = row["dp_instructions"] if row["dp_instructions"] is not None else row.get("trace_instructions")
    naive = row["naive_instructions"] if row["naive_instructions"] is not None else row.get(
        "naive_trace_instructions")
    return {"dp_per_class": dp / k if dp is not None else None,
            "naive_per_class": naive / k if naive is not None else None,
            "dp_over_naive": dp / naive if dp and naive else None}


def _measure(dev: Device, tracer: _Tracer | None, unit: icount.TickUnit, lockstep: bool,
             k: int, eps: float, n: int, seed: int, stop: Callable[[], bool] = _never,
             ctracer: _Tracer | None = None) -> dict:
    """One benchmark row: n DP queries and n NAIVE runs at (eps, k), measured and traced, and
    the same queries traced on the C loop's image if ``ctracer`` (raises _Stop between two of
    them once stop() is true)."""
    if n < 1:
        raise ValueError(f"k {k}: at least one measured query per point, not {n}")
    x = bench_input(k, seed)
    dp, setup_frame, c_steps = _dp_queries(dev, tracer, unit, lockstep, x, n, stop, ctracer)
    naive = _naive_runs(dev, tracer, unit, lockstep, x, SENSITIVITY / eps, n, stop)
    row: dict = {"k": k, "epsilon": eps, "queries": n, **_measured(unit, dp, naive)}
    if tracer:
        row.update(_traced(dp, naive, setup_frame, k, lockstep))
    if c_steps:
        row.update({"c_loop_trace_instructions": _mean([s.instructions for s in c_steps]),
                    "c_loop_chacha_blocks": _mean([s.chacha_blocks for s in c_steps]),
                    "c_loop_keystream_bits": None if any(s.keystream_bits is None for s in c_steps)
                    else _mean([s.keystream_bits for s in c_steps])})
    row.update(_per_class(row, k))
    return row


def _add_deadlines(rows: list[dict], cfg: BenchConfig) -> None:
    """Each row's release deadline on the production image (docs/benchmarks.md §5): the
    same configuration and input in build/qemu-timing/edgedp.elf under Unicorn, the plan ready
    (`deadline_instructions`), with the longest window measured (`max_work_instructions`: the
    row's query count, up to 3, the first with a forced reseed), the optimum's estimate
    (`optimum_instructions`, edgedp.bench.deadline.optimum_estimate, as for INFER) and the
    deadline over it, and the same for the first query after the CONFIG, which prepares the plan
    (`first_*`)."""
    from ..device.targets.qemu import ensure_image
    from .deadline import optimum_estimate, query_windows
    configs = [(r["epsilon"], r["k"]) for r in rows]
    n = max(1, min(3, min(r["queries"] for r in rows)))
    res = query_windows(ensure_image("qemu-timing"), configs, n,
                        mech=lambda eps: MechConfig(to_micro(eps)), inputs=lambda k: bench_input(k, cfg.seed))
    for r in rows:
        w = res[(r["epsilon"], r["k"])]
        optimum = optimum_estimate(w["warm"], w["noise_bound"])
        r.update({"deadline_instructions": w["warm"]["deadline"], "max_work_instructions": w["warm"]["work"],
                  "first_deadline_instructions": w["first"]["deadline"],
                  "first_work_instructions": w["first"]["work"], "optimum_instructions": optimum,
                  "deadline_over_optimum": w["warm"]["deadline"] / optimum})


def _amortised(instructions: float, keystream_bits: float, chacha_blocks: float, batch, k: int) -> float:
    """A traced step per class with its keystream amortised: less the batches generated inside
    it, plus the bits it read at the batch's cost per bit."""
    return (instructions + keystream_bits * batch.per_bit - chacha_blocks / batch.blocks * batch.instructions) / k


def _add_entropy_limits(rows: list[dict], elf: Path, c_loop_elf: Path | None = None) -> None:
    """Each row's entropy limit per class (edgedp.bench.entropy) at the image's DRBG cost per bit,
    the DP step per class over it, and the step with its keystream amortised: the traced
    instructions less the batches that happened to be generated inside the traced steps, plus
    the bits those steps read at the batch's cost per bit (the long-run cost of those bits; a
    60-query window holds a handful of batches of about 3,200 instructions each, so one batch
    more or less moves the windowed figure by about 5 per class at k = 10). With ``c_loop_elf``
    the C loop's steps are amortised the same way, at its image's own batch cost."""
    from .entropy import drbg_batch, limit_per_class
    batch = drbg_batch(elf)
    c_batch = drbg_batch(c_loop_elf) if c_loop_elf else None
    for r in rows:
        r["drbg_instructions_per_bit"] = batch.per_bit
        r.update(limit_per_class(r["k"], r["epsilon"], batch.per_bit, MechConfig(to_micro(r["epsilon"]))))
        dp = r.get("dp_per_class")
        r["dp_over_entropy_limit"] = dp / r["entropy_limit_per_class"] if dp else None
        if r.get("keystream_bits") is not None and r.get("trace_instructions"):
            # from the trace alone: its queries are the ones whose bits and batches were counted
            # (on QEMU the same as the target's, in lockstep; on Renode the target's keystream differs)
            k = r["k"]
            amortised = _amortised(r["trace_instructions"], r["keystream_bits"], r["chacha_blocks"], batch, k)
            naive = r.get("naive_trace_instructions")
            r["keystream_bits_per_class"] = r["keystream_bits"] / k
            r["dp_per_class_amortised"] = amortised
            r["dp_over_naive_amortised"] = amortised * k / naive if naive else None
            r["dp_over_entropy_limit_amortised"] = amortised / r["entropy_limit_per_class"]
            if c_batch is not None and r.get("c_loop_keystream_bits") is not None:
                c = _amortised(r["c_loop_trace_instructions"], r["c_loop_keystream_bits"],
                               r["c_loop_chacha_blocks"], c_batch, k)
                r["c_loop_per_class_amortised"] = c
                r["asm_loop_reduction"] = 1.0 - amortised / c


def check_targets(result: dict) -> dict:
    """The performance targets (k = 10 under 100 us, at most the naive sampler; k = 1000 at most 150
    instructions per class; DP core footprint), evaluated on this run (benchmark, not a test). The
    per-class ones use the DP step with its keystream amortised when the trace gave it for every
    row (`basis`), else the windowed figure. The 100 us one is always on the window (`basis`
    "window"): the traced step's cycles as each answer ran them, its ChaCha20 batches included,
    which is what an answer's time is."""
    rows = result["rows"]
    out: dict = {}
    k10 = [r for r in rows if r["k"] == 10]
    k1000 = [r for r in rows if r["k"] == 1000]
    if k10 and all(r.get("est_us_168mhz") is not None for r in k10):
        worst = max(r["est_us_168mhz"] for r in k10)
        out["k10_under_100us"] = {"worst_us": worst, "ok": worst < TARGET_K10_US, "basis": "window"}
    amortised = bool(rows) and all(r.get("dp_per_class_amortised") is not None for r in rows)
    basis = "amortised" if amortised else "window"

    def pick(r: dict, key: str) -> float:
        """The row's figure with the keystream amortised when every row has it, else as measured."""
        return r[key + "_amortised"] if amortised else r[key]

    if k10 and all(r.get("dp_over_naive") for r in k10):
        worst = max(pick(r, "dp_over_naive") for r in k10)
        out["k10_at_most_naive"] = {"worst_ratio": worst, "ok": worst <= 1.0, "basis": basis}
        out["k10_at_most_0.8_naive"] = {"worst_ratio": worst, "ok": worst <= TARGET_K10_NAIVE, "basis": basis}
    if rows and all(r.get("dp_over_entropy_limit") for r in rows):
        worst_row = max(rows, key=lambda r: pick(r, "dp_over_entropy_limit"))
        worst = pick(worst_row, "dp_over_entropy_limit")
        out["at_most_2.5_entropy_limit"] = {"worst_ratio": worst, "basis": basis, "limit": TARGET_ENTROPY_RATIO,
                                            "at": {"k": worst_row["k"], "epsilon": worst_row["epsilon"]},
                                            "ok": worst <= TARGET_ENTROPY_RATIO, "gated": False}
    out.update(issue42_targets(rows, amortised))
    if k1000 and all(r.get("dp_per_class") for r in k1000):
        worst = max(pick(r, "dp_per_class") for r in k1000)
        out["k1000_at_most_150_per_class"] = {"worst_per_class": worst, "ok": worst <= TARGET_K1000_PER_CLASS,
                                              "basis": basis}
    dl = [r for r in rows if r["k"] >= 10 and r.get("deadline_over_optimum")]
    if dl:
        worst_row = max(dl, key=lambda r: r["deadline_over_optimum"])
        out["query_deadline_at_most_2x_optimum"] = {
            "worst_ratio": worst_row["deadline_over_optimum"],
            "at": {"k": worst_row["k"], "epsilon": worst_row["epsilon"]},
            "ok": worst_row["deadline_over_optimum"] <= TARGET_DEADLINE_RATIO}
    cl = [r for r in rows if r.get("asm_loop_reduction") is not None]
    if cl:
        worst_row = max(cl, key=lambda r: r["c_loop_per_class_amortised"])
        out["thumb2_loop_at_least_10pct_below_c"] = {
            "reduction": worst_row["asm_loop_reduction"],
            "thumb2_per_class": worst_row["dp_per_class_amortised"],
            "c_per_class": worst_row["c_loop_per_class_amortised"],
            "least_reduction": min(r["asm_loop_reduction"] for r in cl),
            "at": {"k": worst_row["k"], "epsilon": worst_row["epsilon"]},
            "ok": worst_row["asm_loop_reduction"] >= TARGET_ASM_REDUCTION}
    fp = result.get("footprint") or {}
    if "dp_flash_linked" in fp:
        out["dp_flash_at_most_8k"] = {"bytes": fp["dp_flash_linked"], "ok": fp["dp_flash_linked"] <= TARGET_FLASH,
                                      "with_soft_double_runtime": fp.get("dp_closure_flash")}
        out["dp_ram_at_most_1k"] = {"bytes": fp["dp_ram"], "ok": fp["dp_ram"] <= TARGET_RAM,
                                    "plus_table_bytes": fp["table_bytes"]}
    return out


def _worst(points: list[tuple[dict, float]], limit: float, **extra) -> dict:
    """A per-point target: the worst (row, figure) against the limit, and every point judged."""
    row, worst = max(points, key=lambda p: p[1])
    return {"worst": worst, "limit": limit, "ok": worst <= limit, "at": {"k": row["k"], "epsilon": row["epsilon"]},
            "points": len(points), **extra}


def _today(table: Mapping[tuple[int, float], float], r: dict) -> float | None:
    return table.get((r["k"], float(r["epsilon"])))


def issue42_targets(rows: list[dict], amortised: bool) -> dict:
    """Issue 42's targets on the points of this run that carry their figure (a target none of
    them carries is absent): bits per sample at most H + 3 and the amortised DP step at most 0.75x
    today's at every k >= 10 point, the step at most the naive sampler at k = 1 (amortised), QUERY
    framing at most 60 instructions per class at k = 1000 and the release deadline at most 0.8x
    today's at every k >= 10 point. Each gives its worst figure, the limit and where."""
    out: dict = {}
    big = [r for r in rows if r["k"] >= 10]
    bits = [(r, r["keystream_bits_per_class"] - r["entropy_bits"]) for r in big
            if r.get("keystream_bits_per_class") is not None and r.get("entropy_bits") is not None]
    if bits:
        out["bits_at_most_h_plus_3"] = _worst(bits, TARGET_BITS_OVER_H)
    if amortised:
        dp = [(r, r["dp_per_class_amortised"] / t) for r in big if (t := _today(TODAY_DP_PER_CLASS, r))]
        if dp:
            out["dp_step_at_most_0.75_today"] = _worst(dp, TARGET_DP_STEP_RATIO)
        k1 = [(r, r["dp_over_naive_amortised"]) for r in rows
              if r["k"] == 1 and r.get("dp_over_naive_amortised") is not None]
        if k1:
            out["k1_at_most_naive"] = _worst(k1, 1.0)
    fr = [(r, r["framing_instructions"] / r["k"]) for r in rows
          if r["k"] == 1000 and r.get("framing_instructions") is not None]
    if fr:
        out["framing_k1000_at_most_60_per_class"] = _worst(fr, TARGET_FRAMING_K1000)
    dl = [(r, r["deadline_instructions"] / t) for r in big
          if r.get("deadline_instructions") and (t := _today(TODAY_DEADLINE, r))]
    if dl:
        out["deadline_at_most_0.8_today"] = _worst(dl, TARGET_DEADLINE_42_RATIO)
    return out


def missed_targets(targets: dict) -> list[str]:
    """The gated targets this run missed (`bench --check` fails on them); an informational one
    (``"gated": False``, the entropy ratio) is reported, never gated."""
    return [name for name, v in targets.items() if not v["ok"] and v.get("gated", True)]


# ---- presentation --------------------------------------------------------------------

def _fmt(v, spec: str = ".0f") -> str:
    return "-" if v is None else format(v, spec)


def table(result: dict) -> str:
    """Plain-text table for the terminal (and the markdown one for docs)."""
    return markdown(result, plain=True)


def markdown(result: dict, plain: bool = False) -> str:
    head = ["k", "eps", "dp instr", "/class", "naive instr", "/class", "dp/naive", "est cycles", "est us@168",
            "chacha", "drbg", "sampler", "mech", "bits/class", "amortised/class", "amortised/naive", "H bits",
            "limit/class", "dp/limit", "amortised/limit", "frame instr", "framing/class",
            "q/s", "deadline", "max work", "optimum", "dl/opt"]
    lines = []
    for r in result["rows"]:
        b = r.get("breakdown") or {}
        lines.append([str(r["k"]), f"{r['epsilon']:g}", _fmt(r["dp_instructions"] or r.get("trace_instructions")),
                      _fmt(r["dp_per_class"], ".1f"),
                      _fmt(r["naive_instructions"] or r.get("naive_trace_instructions")),
                      _fmt(r["naive_per_class"], ".1f"), _fmt(r["dp_over_naive"], ".2f"),
                      _fmt(r.get("est_cycles")), _fmt(r.get("est_us_168mhz"), ".1f"),
                      _fmt(b.get("chacha"), ".1f"), _fmt(b.get("drbg"), ".1f"), _fmt(b.get("sampler"), ".1f"),
                      _fmt(b.get("mechanism"), ".1f"), _fmt(r.get("keystream_bits_per_class"), ".1f"),
                      _fmt(r.get("dp_per_class_amortised"), ".1f"), _fmt(r.get("dp_over_naive_amortised"), ".2f"),
                      _fmt(r.get("entropy_bits"), ".1f"),
                      _fmt(r.get("entropy_limit_per_class"), ".1f"), _fmt(r.get("dp_over_entropy_limit"), ".2f"),
                      _fmt(r.get("dp_over_entropy_limit_amortised"), ".2f"),
                      _fmt(r.get("frame_instructions")),
                      _fmt(r["framing_instructions"] / r["k"] if r.get("framing_instructions") is not None else None,
                           ".1f"),
                      _fmt(r["queries_per_second"], ".1f"), _fmt(r.get("deadline_instructions")),
                      _fmt(r.get("max_work_instructions")), _fmt(r.get("optimum_instructions")),
                      _fmt(r.get("deadline_over_optimum"), ".2f")])
    if plain:
        widths = [max([len(h), *(len(l[i]) for l in lines)]) for i, h in enumerate(head)]
        fmt = "  ".join("{:>%d}" % w for w in widths)
        return "\n".join([fmt.format(*head)] + [fmt.format(*l) for l in lines]
                         + ([partial_note(result)] if result.get("partial") else []))
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(l) + " |" for l in lines]
    if result.get("partial"):
        out.append(f"\n{partial_note(result)}")
    return "\n".join(out)


def partial_note(result: dict) -> str:
    """One line on what a partial run left out (the points not measured, the parts not run)."""
    missing = ", ".join(f"k={m['k']} eps={m['epsilon']:g}" for m in result["missing"])
    return (f"Partial run ({result['stopped']}): {len(result['rows'])} points measured"
            + (f"; not measured: {missing}" if missing else "")
            + (f"; not run: {', '.join(result['skipped'])}" if result["skipped"] else "") + ".")


def plot(result: dict, path: Path) -> Path:
    """PNG: instructions per query and per class against k, DP per epsilon and the naive baseline."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for eps in sorted({r["epsilon"] for r in rows}):
        rs = sorted((r for r in rows if r["epsilon"] == eps), key=lambda r: r["k"])
        ks = [r["k"] for r in rs]
        dp = [r["dp_instructions"] or r.get("trace_instructions") for r in rs]
        ax1.loglog(ks, dp, "o-", label=f"exact DP, eps={eps:g}")
        ax2.semilogx(ks, [r["dp_per_class"] for r in rs], "o-", label=f"exact DP, eps={eps:g}")
    rs = sorted((r for r in rows if r["epsilon"] == rows[0]["epsilon"]), key=lambda r: r["k"]) if rows else []
    if rs and rs[0].get("naive_per_class"):
        ks = [r["k"] for r in rs]
        ax1.loglog(ks, [r["naive_per_class"] * r["k"] for r in rs], "k--", label="naive rand()+logf")
        ax2.semilogx(ks, [r["naive_per_class"] for r in rs], "k--", label="naive rand()+logf")
    ax2.axhline(TARGET_K1000_PER_CLASS, color="r", lw=0.8, ls=":", label="target at k=1000")
    ax1.set_xlabel("classes k")
    ax1.set_ylabel("instructions per query (DP step)")
    ax2.set_xlabel("classes k")
    ax2.set_ylabel("instructions per class")
    ax2.set_ylim(bottom=0)
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # a run stopped before its first row has no curve
            ax.legend(fontsize=8)
    fig.suptitle(f"edgedp DP step on {result['board']} ({result['target']}), commit {result['commit']}",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def default_plot_path() -> Path:
    return build_dir() / "bench" / "bench.png"


_TARGET_LINES = {
    "k10_under_100us": lambda v: f"k=10 under 100 us at 168 MHz: worst {v['worst_us']:.1f} us ({v['basis']})",
    "k10_at_most_naive": lambda v: f"k=10 at most the naive baseline: worst ratio {v['worst_ratio']:.2f} "
                                   f"({v['basis']})",
    "k10_at_most_0.8_naive": lambda v: f"k=10 at most 0.8x the naive baseline: worst ratio {v['worst_ratio']:.2f} "
                                       f"({v['basis']})",
    "at_most_2.5_entropy_limit": lambda v: (f"at most 2.5x the entropy limit: worst ratio {v['worst_ratio']:.2f} "
                                            f"at k={v['at']['k']}, eps={v['at']['epsilon']:g} ({v['basis']}; "
                                            f"informational, not gated)"),
    "k1000_at_most_150_per_class": lambda v: f"k=1000 at most 150 instructions per class: worst "
                                             f"{v['worst_per_class']:.1f} ({v['basis']})",
    "thumb2_loop_at_least_10pct_below_c": lambda v: (
        f"Thumb-2 sampling loop at least 10% below the C loop at the grid's worst point: "
        f"{v['thumb2_per_class']:.1f} against {v['c_per_class']:.1f} amortised per class, "
        f"{100 * v['reduction']:.1f}% lower at k={v['at']['k']}, eps={v['at']['epsilon']:g} "
        f"(least over the grid {100 * v['least_reduction']:.1f}%)"),
    "query_deadline_at_most_2x_optimum": lambda v: (f"QUERY release deadline at most 2x the optimum (k >= 10): "
                                                    f"worst {v['worst_ratio']:.2f} at k={v['at']['k']}, "
                                                    f"eps={v['at']['epsilon']:g} (against the optimum's "
                                                    f"estimate, an upper one: the true ratio is higher)"),
}


def _at(v: dict) -> str:
    return f"at k={v['at']['k']}, eps={v['at']['epsilon']:g}, {v['points']} points"


_TARGET_LINES.update({
    "bits_at_most_h_plus_3": lambda v: (f"keystream bits per sample at most H + {v['limit']:g} (k >= 10): worst "
                                        f"H + {v['worst']:.2f} {_at(v)}"),
    "dp_step_at_most_0.75_today": lambda v: (f"DP step at most {v['limit']:g}x e2d3e4c's per point (k >= 10, "
                                             f"amortised): worst {v['worst']:.3f}x {_at(v)}"),
    "k1_at_most_naive": lambda v: (f"k=1 at most the naive sampler (amortised): worst {v['worst']:.3f}x "
                                   f"(limit {v['limit']:g}x) {_at(v)}"),
    "framing_k1000_at_most_60_per_class": lambda v: (f"QUERY framing at k=1000 at most {v['limit']:g} instructions "
                                                     f"per class: worst {v['worst']:.1f} {_at(v)}"),
    "deadline_at_most_0.8_today": lambda v: (f"QUERY release deadline at most {v['limit']:g}x e2d3e4c's per point "
                                             f"(k >= 10): worst {v['worst']:.3f}x {_at(v)}"),
})


def target_results(result: dict) -> list[tuple[str, str, bool]]:
    """Each target evaluated in this run: (its name in the JSON, what was measured against it, met)."""
    t = result["targets"]
    out = [(name, line(t[name]), bool(t[name]["ok"])) for name, line in _TARGET_LINES.items() if name in t]
    if "dp_flash_at_most_8k" in t:
        v = t["dp_flash_at_most_8k"]
        out.append(("dp_flash_at_most_8k", f"DP core flash <= {TARGET_FLASH / 1024:g} KiB: {v['bytes']} B "
                    f"({v['with_soft_double_runtime']} B with the soft-double set-up runtime)", bool(v["ok"])))
        v = t["dp_ram_at_most_1k"]
        out.append(("dp_ram_at_most_1k", f"DP core RAM <= {TARGET_RAM / 1024:g} KiB plus table: {v['bytes']} B "
                    f"+ {v['plus_table_bytes']} B table per configuration", bool(v["ok"])))
    return out


def describe_targets(result: dict) -> list[str]:
    return [f"{text} {'OK' if ok else 'MISSED'}" for _, text, ok in target_results(result)]
