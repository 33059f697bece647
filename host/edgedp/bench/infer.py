"""INFER cost per bundled model: inference vs the DP step, and whole frames (CRC, COBS, UART).

For each model image (build/qemu-model-NAME/edgedp.elf, the test image with that model):

* under QEMU -icount, the INFER answer's two tick fields: the model run and the DP step
  (instructions = ticks / 1.344, edgedp.bench.icount);
* in Unicorn (edgedp.bench.trace), the same frames counted exactly: the two measured regions
  and the whole frame from the first received byte to the last byte written to the UART, so
  framing = frame - inference - DP step. QUERY frames of k = 10 and 1000 are measured the same way.
"""
from __future__ import annotations

import subprocess

import numpy as np

from ..device.client import Device, load_key
from ..device.errors import TransportError
from ..device.protocol import Caps, MechConfig
from ..device.targets.qemu import QemuTarget
from ..paths import project_root
from . import icount
from .trace import Emulator, TraceLink

MODELS = ("digits_logreg", "digits_mlp", "digits_ensemble", "digits_logreg_int8", "digits_mlp_int8",
          "digits_ensemble_int8")
QUERY_KS = (10, 1000)


def model_image(name: str, timing: bool = False):
    """The QEMU image with bundled model `name` (the test image, or the production timing one)."""
    target = f"build/qemu-{'timing-' if timing else ''}model-{name}/edgedp.elf"
    r = subprocess.run(["make", "-C", str(project_root()), target], capture_output=True, text=True)
    if r.returncode != 0:
        raise TransportError(f"building {target} failed:\n{r.stderr[-2000:]}")
    return project_root() / target


def _inputs(n: int) -> np.ndarray:
    from ..datasets import digits_split
    return digits_split(0).X_test[:n].astype(np.float32)


def _traced(elf, key: bytes, X: np.ndarray, mode: str) -> dict:
    emu = Emulator(elf)
    emu.install_model()
    dev = Device(TraceLink(emu), timeout=60.0)
    dev.configure(key, MechConfig(), Caps(10**12))
    dev.infer(X[0], mode)  # warm-up: builds the mechanism table for the model's range
    infer, dp, frame = [], [], []
    for x in X:
        emu.steps()
        c0 = emu.count
        dev.infer(x, mode)
        steps = emu.steps()
        frame.append(emu.count - c0)
        infer.append(steps[0].instructions)
        dp.append(steps[1].instructions)
    return {"inference": float(np.mean(infer)), "dp_step": float(np.mean(dp)), "frame": float(np.mean(frame))}


def _qemu(elf, key: bytes, X: np.ndarray, mode: str, name: str) -> dict:
    t = QemuTarget(elf, 1, f"qemu-model-{name}")
    try:
        dev = Device(t.link(), timeout=30.0, target=t)
        dev.sync()
        unit = icount.tick_unit(dev.info(), "qemu")
        dev.configure(key, MechConfig(), Caps(10**12))
        dev.reset_budget(key)
        dev.infer(X[0], mode)
        infer, dp = [], []
        for x in X:
            r, ti = dev.infer(x, mode)
            assert r.ticks is not None  # parse_query reads it from every answer
            infer.append(unit.counted_instructions(ti))
            dp.append(unit.counted_instructions(r.ticks))
        return {"inference": float(np.mean(infer)), "dp_step": float(np.mean(dp))}
    finally:
        t.close()


def _query_frames(key: bytes, queries: int) -> list[dict]:
    from ..device.targets.qemu import ensure_image
    emu = Emulator(ensure_image("qemu"))
    dev = Device(TraceLink(emu), timeout=60.0)
    dev.configure(key, MechConfig(), Caps(10**12))
    rows = []
    for k in QUERY_KS:
        x = np.random.default_rng(k).dirichlet(np.ones(k)).astype(np.float32)
        dev.query(x, "full")
        dp, frame = [], []
        for _ in range(queries):
            emu.steps()
            c0 = emu.count
            dev.query(x, "full")
            dp.append(emu.steps()[0].instructions)
            frame.append(emu.count - c0)
        d, f = float(np.mean(dp)), float(np.mean(frame))
        rows.append({"k": k, "mode": "full", "dp_step": d, "frame": f, "framing": f - d,
                     "framing_per_class": (f - d) / k, "dp_per_class": d / k})
    return rows


def _deadline(name: str, X: np.ndarray, mode: str) -> dict:
    """The model's INFER release deadline on its production timing image (docs/benchmarks.md
    section 9): the first INFER after a CONFIG (it prepares the plan) and up to 3 more, the first
    of them with a forced reseed; the bound and the longest window of each."""
    from .deadline import infer_windows, optimum_estimate
    w = infer_windows(model_image(name, timing=True), X[:4], mode)
    optimum = optimum_estimate(w["warm"], w["noise_bound"])
    return {"deadline_instructions": w["warm"]["deadline"], "max_work_instructions": w["warm"]["work"],
            "first_deadline_instructions": w["first"]["deadline"],
            "first_work_instructions": w["first"]["work"], "optimum_instructions": optimum,
            "deadline_over_optimum": w["warm"]["deadline"] / optimum}


def run(n: int = 20, mode: str = "label", qemu: bool = True, deadline: bool = True, progress=None) -> dict:
    """Per model: size, inference and DP-step instructions (QEMU ticks and exact trace), frame
    instructions, the production release deadline, the longest window and the optimum's estimate
    (`deadline`, edgedp.bench.deadline.optimum_estimate); and QUERY
    frames at k = 10 and 1000 (framing vs DP step)."""
    from ..model import cgen
    say = progress or (lambda msg: None)
    key = load_key()  # the test images' key
    X = _inputs(n)
    rows = []
    for name in MODELS:
        say(f"INFER {name}")
        elf = model_image(name)
        model = cgen.read(project_root() / "firmware/model" / f"{name}.c")
        tr = _traced(elf, key, X, mode)
        row = {"model": name, "head": model.head, "nets": len(model.nets), "macs": model.macs,
               "weight_bytes": model.flash_bytes, "scratch_bytes": model.scratch_bytes,
               "mode": mode, "inputs": n,
               "trace_inference": tr["inference"], "trace_dp_step": tr["dp_step"], "frame": tr["frame"],
               "framing": tr["frame"] - tr["inference"] - tr["dp_step"],
               "dp_share_of_inference": tr["dp_step"] / tr["inference"]}
        if deadline:
            row.update(_deadline(name, X if len(X) > 1 else np.repeat(X, 2, axis=0), mode))
        if qemu:
            q = _qemu(elf, key, X, mode, name)
            row.update(qemu_inference=q["inference"], qemu_dp_step=q["dp_step"])
        rows.append(row)
    say("QUERY frames")
    return {"models": rows, "query_frames": _query_frames(key, 3)}


def _count(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def markdown(res: dict) -> str:
    out = ["| model | nets | multiply-adds | weights (flash) | scratch RAM | inference instr. (QEMU / trace) | "
           "DP step instr. (QEMU / trace) | DP / inference | whole INFER frame | framing | deadline | max work |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["models"]:
        q_inf = f"{r['qemu_inference']:,.0f}" if "qemu_inference" in r else "-"
        q_dp = f"{r['qemu_dp_step']:,.0f}" if "qemu_dp_step" in r else "-"
        out.append(f"| {r['model']} | {r['nets']} | {r['macs']:,} | {r['weight_bytes']:,} B | {r['scratch_bytes']} B | "
                   f"{q_inf} / {r['trace_inference']:,.0f} | {q_dp} / {r['trace_dp_step']:,.0f} | "
                   f"{r['dp_share_of_inference']:.1%} | {r['frame']:,.0f} | {r['framing']:,.0f} | "
                   f"{_count(r.get('deadline_instructions'))} | {_count(r.get('max_work_instructions'))} |")
    out += ["", "| QUERY frame | DP step | whole frame | framing | framing per class | DP per class |",
            "|---|---|---|---|---|---|"]
    for r in res["query_frames"]:
        out.append(f"| k = {r['k']}, {r['mode']} | {r['dp_step']:,.0f} | {r['frame']:,.0f} | {r['framing']:,.0f} | "
                   f"{r['framing_per_class']:.0f} | {r['dp_per_class']:.0f} |")
    return "\n".join(out)
