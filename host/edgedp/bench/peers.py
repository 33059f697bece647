"""The bundled float models on their peers' kernels, measured in one run: CMSIS-DSP f32 and emlearn.

For each bundled float model (firmware/model/NAME.c: the same float32 weights, read back with
edgedp.model.cgen) three harness ELFs are cross-compiled with the QEMU test image's flags
(firmware/sources.mk EDP_ARM_CFLAGS) and the same small linker script, and run in Unicorn on
the same digits test images:

* edgedp: firmware/core/src/model.c and its dense loops (arch/armv7m/model_armv7m.c) with the
  model file; counted: ``edp_model_run`` (every
  dense layer, the ReLUs, the head: softmax, or the argmax vote of each net).
* CMSIS-DSP 1.10.3 (the sdist from PyPI; CMSIS-NN has no float kernels, and CMSIS-DSP's
  ``arm_mat_vec_mult_f32`` is the float dense kernel): per layer ``arm_mat_vec_mult_f32``,
  ``arm_add_f32`` (bias), ``arm_clip_f32`` to [0, FLT_MAX] (ReLU) between layers; the head as
  ``arm_max_f32`` then, for a softmax, ``arm_offset_f32`` (- max), ``arm_vexp_f32`` (libm expf),
  ``arm_accumulate_f32`` and ``arm_scale_f32`` (1 / sum). Counted: the harness's ``peer_run``.
* emlearn (PyPI, ``edgedp[peers]``): the C of emlearn's "loadable" generator
  (``emlearn.net.c_generate_net_loadable``: an ``EmlNet`` run by ``eml_net_predict_proba``, or
  for a one-layer net ``eml_net_layer_forward``; ``eml_net_forward`` per layer, its softmax with
  libm expf and logf), one net per ensemble member voting with ``eml_net_argmax``; the generator prints
  weights with 6 decimals, so the harness rewrites its arrays as exact hex floats (the same
  float32 weights for all three). Counted: the harness's ``peer_run``.

Each count is the instructions of one call, longest of the inputs (the loops do not depend on
the values, so all inputs cost nearly the same). Flash and RAM are what a harness adds to an
empty one (``arm-none-eabi-size``: text + data, data + bss; code, weights, buffers, libm where
used); stack is the deepest the call went. Outputs are checked against the NumPy reference
(edgedp.model.reference): edgedp bit for bit, the peers to within ``TOLERANCE`` (their sums add
the bias last, their exp is libm's) and with the same votes. Nothing fetched is kept outside
build/peers/.
"""
from __future__ import annotations

import re
import shlex
import struct
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..device.errors import EdgeDPError
from ..model.spec import DeviceModel
from ..paths import project_root

MODELS = ("digits_logreg", "digits_mlp", "digits_ensemble")
PEERS = ("edgedp", "cmsis_dsp", "emlearn")
CMSIS_DSP = ("cmsisdsp", "1.10.3")
CMSIS_DSP_FILES = (
    "Source/MatrixFunctions/arm_mat_vec_mult_f32.c",
    "Source/BasicMathFunctions/arm_add_f32.c",
    "Source/BasicMathFunctions/arm_clip_f32.c",
    "Source/BasicMathFunctions/arm_offset_f32.c",
    "Source/BasicMathFunctions/arm_scale_f32.c",
    "Source/StatisticsFunctions/arm_max_f32.c",
    "Source/StatisticsFunctions/arm_accumulate_f32.c",
    "Source/FastMathFunctions/arm_vexp_f32.c",
)
# CMSIS-DSP's CMake defaults (LOOPUNROLL on); __GNUC_PYTHON__ drops the CMSIS-Core dependency,
# which only the fixed-point kernels' DSP intrinsics need.
CMSIS_DSP_DEFS = ("-DARM_MATH_LOOPUNROLL", "-D__GNUC_PYTHON__")
EDGEDP_FILES = ("model.c", "model_s8.c", "model_graph.c", "sha256.c", "arch/armv7m/model_armv7m.c", "arch/portable/model_portable.c")
TOLERANCE = 1e-5
LINKER_SCRIPT = """\
MEMORY { FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 1M
         RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 128K }
ENTRY(peer_run)
SECTIONS {
  .text : { *(.text*) *(.rodata*) } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  .data : { *(.data*) } > RAM AT > FLASH
  .bss (NOLOAD) : { KEEP(*(.bss.peer_x)) KEEP(*(.bss.peer_out)) *(.bss*) *(COMMON) } > RAM
  end = .; _end = .;
}
"""
HARNESS_HEAD = "#include <stdint.h>\n#include <string.h>\nfloat peer_x[{n}];\nfloat peer_out[{k}];\n"


class PeerError(EdgeDPError):
    """A peer's sources are missing, or its harness does not build or does not match the reference."""


def peers_dir() -> Path:
    return project_root() / "build" / "peers"


# ---- the peers' sources ---------------------------------------------------------------------------
def cmsis_dsp_source(download: bool = True) -> Path:
    """CMSIS-DSP's sources (the files above and Include/) under build/peers/, from the PyPI sdist
    in build/peers/cache (``pip download`` when it is not there and `download`)."""
    name, version = CMSIS_DSP
    root = peers_dir() / f"{name}-{version}"
    if all((root / f).exists() for f in CMSIS_DSP_FILES + ("Include/arm_math.h", "PrivateInclude/arm_compiler_specific.h")):
        return root
    cache = peers_dir() / "cache"
    sdist = cache / f"{name}-{version}.tar.gz"
    if not sdist.exists():
        if not download:
            raise PeerError(f"CMSIS-DSP sources not available offline ({sdist} missing)")
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-build-isolation",
               "--no-binary", ":all:", f"{name}=={version}", "-d", str(cache)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise PeerError(f"{shlex.join(cmd)} timed out") from None
        if r.returncode != 0 or not sdist.exists():
            raise PeerError(f"{shlex.join(cmd)} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    prefix = f"{name}-{version}/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and (
            m.name[len(prefix):] in CMSIS_DSP_FILES or m.name.startswith(prefix + "Include/")
            or m.name.startswith(prefix + "PrivateInclude/") or m.name[len(prefix):] == "LICENSE")]
        if any(".." in m.name.split("/") for m in members):
            raise PeerError(f"{sdist}: a member path leaves the archive")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
            tar.extractall(peers_dir(), members=members, filter="data")
        else:
            tar.extractall(peers_dir(), members=members)
    return root


def _import_emlearn(module: str = "emlearn"):
    """Import emlearn (or one of its modules) without its side effect on the process: importing
    it runs emlearn.bayes's numpy.seterr(all='raise'), which turns every later float underflow
    anywhere in the process (the divergence computations, the analysis) into an exception."""
    import importlib
    saved = np.geterr()
    try:
        return importlib.import_module(module)
    finally:
        np.seterr(**saved)


def emlearn_include() -> Path:
    """emlearn's C headers (the installed package, ``pip install edgedp[peers]``)."""
    try:
        emlearn = _import_emlearn()
    except ImportError:
        raise PeerError("emlearn is not installed (pip install 'edgedp[peers]')") from None
    return Path(emlearn.includedir)


def sources(download: bool = True) -> tuple[Path, Path]:
    """Both peers' sources (CMSIS-DSP's root, emlearn's headers), or PeerError saying which is missing."""
    return cmsis_dsp_source(download), emlearn_include()


# ---- harness sources -------------------------------------------------------------------------------
def _hex(values: np.ndarray) -> str:
    from ..model.cgen import _f
    return ", ".join(_f(np.float32(v)) for v in np.asarray(values, dtype=np.float32).ravel())


def _farray(name: str, values: np.ndarray, const: bool = True) -> str:
    q = "static const " if const else ""
    return f"{q}float {name}[{np.asarray(values).size}] = {{{_hex(values)}}};\n"


def edgedp_source(model: DeviceModel, k: int) -> str:
    """peer_run for the flash/RAM build: edp_model_run (what is counted) and the copy out."""
    return (HARNESS_HEAD.format(n=model.n_features, k=k) + '#include "edgedp/model.h"\n'
            "extern const edp_model_t *const edp_app_model;\n"
            "void peer_run(const float *x, float *out)\n"
            f"{{ memcpy(out, edp_model_run(edp_app_model, x), {k} * sizeof *out); }}\n")


def empty_source(model: DeviceModel, k: int) -> str:
    return HARNESS_HEAD.format(n=model.n_features, k=k) + \
        "void peer_run(const float *x, float *out) { (void)x; (void)out; }\n"


def cmsis_source(model: DeviceModel, k: int) -> str:
    """The model on CMSIS-DSP f32 kernels: W transposed (out x in, the device's layout) is
    arm_mat_vec_mult_f32's row-major matrix."""
    width = max(l.w.shape[1] for n in model.nets for l in n.layers)
    out = [HARNESS_HEAD.format(n=model.n_features, k=k), '#include <float.h>\n#include "arm_math.h"\n',
           f"static float act_a[{width}], act_b[{width}];\n"]
    body = []
    for t, net in enumerate(model.nets):
        for i, l in enumerate(net.layers):
            n_in, n_out = l.w.shape
            out.append(_farray(f"w{t}_{i}", l.w.T) + _farray(f"b{t}_{i}", l.b))
            out.append(f"static const arm_matrix_instance_f32 m{t}_{i} = {{{n_out}, {n_in}, (float32_t *)w{t}_{i}}};\n")
        out.append(f"static const uint16_t cls{t}[{len(net.classes)}] = {{{', '.join(map(str, net.classes))}}};\n")
        src = "x"
        for i, l in enumerate(net.layers):
            dst = "act_a" if i % 2 == 0 else "act_b"
            n_out = l.w.shape[1]
            body.append(f"    arm_mat_vec_mult_f32(&m{t}_{i}, {src}, {dst});\n"
                        f"    arm_add_f32({dst}, b{t}_{i}, {dst}, {n_out});\n")
            if i + 1 < len(net.layers):
                body.append(f"    arm_clip_f32({dst}, {dst}, 0.0f, FLT_MAX, {n_out});\n")
            src = dst
        n = len(net.classes)
        body.append(f"    arm_max_f32({src}, {n}, &top, &best);\n")
        if model.head == "votes":
            body.append(f"    out[cls{t}[best]] += 1.0f;\n")
        else:
            body.append(f"    arm_offset_f32({src}, -top, {src}, {n});\n"
                        f"    arm_vexp_f32({src}, {src}, {n});\n"
                        f"    arm_accumulate_f32({src}, {n}, &sum);\n"
                        f"    arm_scale_f32({src}, 1.0f / sum, {src}, {n});\n"
                        f"    for (j = 0; j < {n}; j++) out[cls{t}[j]] = {src}[j];\n")
    out.append("void peer_run(const float *x, float *out)\n{\n"
               "    float32_t top, sum; uint32_t best, j;\n    (void)sum; (void)j;\n"
               f"    memset(out, 0, {k} * sizeof *out);\n" + "".join(body) + "}\n")
    return "".join(out)


_EML_ARRAY = re.compile(r"static const float (\w+)_layer_(\d+)_(weights|biases)\[(\d+)\] = \{[^}]*\};")


def emlearn_source(model: DeviceModel, k: int) -> str:
    """The model in the C of emlearn's "loadable" generator (one EmlNet per net of the model).
    emlearn's eml_net_infer needs two layers or more; a one-layer net runs its one layer with
    eml_net_layer_forward (what eml_net_infer does for each layer) and eml_net_argmax."""
    c_generate_net_loadable = _import_emlearn("emlearn.net").c_generate_net_loadable
    out = [HARNESS_HEAD.format(n=model.n_features, k=k)]
    body = []
    nf = model.n_features
    for t, net in enumerate(model.nets):
        acts = ["relu"] * (len(net.layers) - 1) + ["identity" if model.head == "votes" else "softmax"]
        weights, biases = [l.w for l in net.layers], [l.b for l in net.layers]
        code = c_generate_net_loadable(acts, weights, biases, prefix=f"net{t}")

        def exact(m: re.Match, weights=weights, biases=biases) -> str:
            arr = (weights if m[3] == "weights" else biases)[int(m[2])]
            if arr.size != int(m[4]):
                raise PeerError(f"emlearn's {m[0][:40]}... has {m[4]} values, expected {arr.size}")
            return _farray(f"{m[1]}_layer_{m[2]}_{m[3]}", arr).rstrip("\n")

        code, n_sub = _EML_ARRAY.subn(exact, code)
        if n_sub != 2 * len(net.layers):
            raise PeerError(f"emlearn's generated code did not declare {2 * len(net.layers)} weight arrays")
        n = len(net.classes)
        out.append(code + "\n")
        out.append(f"static const uint16_t cls{t}[{n}] = {{{', '.join(map(str, net.classes))}}};\n")
        if len(net.layers) == 1:
            body.append(f"    eml_net_layer_forward(&net{t}_layers[0], x, {nf}, net{t}_buf2, net{t}.activations_length);\n")
            if model.head == "votes":
                body.append(f"    out[cls{t}[eml_net_argmax(net{t}_buf2, {n})]] += 1.0f;\n")
            else:
                body.append(f"    for (j = 0; j < {n}; j++) out[cls{t}[j]] = net{t}_buf2[j];\n")
        elif model.head == "votes":
            body.append(f"    out[cls{t}[eml_net_predict(&net{t}, x, {nf})]] += 1.0f;\n")
        else:
            body.append(f"    eml_net_predict_proba(&net{t}, x, {nf}, proba, {n});\n"
                        f"    for (j = 0; j < {n}; j++) out[cls{t}[j]] = proba[j];\n")
    out.append(f"void peer_run(const float *x, float *out)\n{{\n    float proba[{k}]; int j; (void)j; (void)proba;\n"
               f"    memset(out, 0, {k} * sizeof *out);\n" + "".join(body) + "}\n")
    return "".join(out)


# ---- build -----------------------------------------------------------------------------------------
def _arm_flags() -> list[str]:
    """EDP_ARM_CFLAGS from firmware/sources.mk, without -Werror (the peers' code is not ours to fix)."""
    text = (project_root() / "firmware" / "sources.mk").read_text()
    m = re.search(r"^EDP_ARM_CFLAGS := (.*?)(?<!\\)\n", text, re.S | re.M)
    if m is None:
        raise PeerError("no EDP_ARM_CFLAGS in firmware/sources.mk")
    flags = m[1].replace("\\\n", " ").split()
    return [f for f in flags if f not in ("-Werror", "-Wall", "-Wextra")]


def _build(name: str, source: str, extra_srcs: list[Path], incs: list[Path], defs: tuple[str, ...] = ()) -> Path:
    d = peers_dir() / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "harness.c").write_text(source)
    ld = peers_dir() / "harness.ld"
    if not ld.exists() or ld.read_text() != LINKER_SCRIPT:
        ld.write_text(LINKER_SCRIPT)
    elf = d / "harness.elf"
    cmd = (["arm-none-eabi-gcc"] + _arm_flags() + list(defs) + [f"-I{i}" for i in incs]
           + [str(d / "harness.c")] + [str(s) for s in extra_srcs]
           + ["-nostartfiles", "-Wl,--gc-sections", "--specs=nano.specs", "--specs=nosys.specs",
              f"-T{ld}", "-o", str(elf), "-lm"])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=project_root())
    except FileNotFoundError:
        raise PeerError("arm-none-eabi-gcc not found (apt-get install gcc-arm-none-eabi)") from None
    if r.returncode != 0:
        log = d / "build.log"
        log.write_text(shlex.join(cmd) + "\n" + r.stderr)
        first = next((l for l in r.stderr.splitlines() if "error" in l), "?")
        raise PeerError(f"building {elf} failed ({log}): {first.strip()}")
    return elf


def _size(elf: Path) -> tuple[int, int]:
    """(flash, RAM) of an ELF: text + data, data + bss."""
    r = subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True, check=True)
    text, data, bss = (int(v) for v in r.stdout.splitlines()[1].split()[:3])
    return text + data, data + bss


@dataclass
class Harness:
    peer: str
    elf: Path
    function: str          # what is counted
    flash: int
    ram: int


def edgedp_harness(name: str, model: DeviceModel, model_c: Path) -> Harness:
    """edgedp's harness for `model` (its generated C at model_c), built under build/peers/name/."""
    core = project_root() / "firmware" / "core"
    k = model.n_classes
    base = _build(f"{name}/empty", empty_source(model, k), [], [])
    elf = _build(f"{name}/edgedp", edgedp_source(model, k), [core / "src" / f for f in EDGEDP_FILES] + [model_c],
                 [core / "include", core / "src"])
    (f, r), (f0, r0) = _size(elf), _size(base)
    return Harness("edgedp", elf, "edp_model_run", f - f0, r - r0)


def build(name: str, model: DeviceModel, download: bool = True) -> dict[str, Harness]:
    """One harness per peer for bundled model `name` (its DeviceModel `model`)."""
    k = model.n_classes
    cmsis, eml = sources(download)
    out = {"edgedp": edgedp_harness(name, model, project_root() / "firmware" / "model" / f"{name}.c")}
    f0, r0 = _size(peers_dir() / name / "empty" / "harness.elf")
    for peer, elf in (
            ("cmsis_dsp", _build(f"{name}/cmsis_dsp", cmsis_source(model, k), [cmsis / f for f in CMSIS_DSP_FILES],
                                 [cmsis / "Include", cmsis / "PrivateInclude"], CMSIS_DSP_DEFS)),
            ("emlearn", _build(f"{name}/emlearn", emlearn_source(model, k), [], [eml]))):
        f, r = _size(elf)
        out[peer] = Harness(peer, elf, "peer_run", f - f0, r - r0)
    return out


# ---- run -------------------------------------------------------------------------------------------
class Runner:
    """A harness ELF in Unicorn: call one function, count its instructions exactly (per block)."""

    def __init__(self, elf: Path):
        from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs
        from unicorn import UC_ARCH_ARM, UC_HOOK_BLOCK, UC_HOOK_MEM_WRITE, UC_MODE_MCLASS, UC_MODE_THUMB, Uc

        from .trace import FLASH_BASE, FLASH_SIZE, RAM_BASE, RAM_SIZE, RETURN_ADDR, Image
        self.image = img = Image.load(elf)
        self.uc = uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        self.cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
        uc.mem_map(FLASH_BASE, FLASH_SIZE)
        uc.mem_map(RAM_BASE, RAM_SIZE)
        uc.mem_map(RETURN_ADDR & ~0xFFF, 0x1000)
        for vaddr, paddr, data, _memsz in img.segments:
            uc.mem_write(paddr, data)
            if vaddr != paddr:
                uc.mem_write(vaddr, data)
        self.stack_top = RAM_BASE + RAM_SIZE
        self.return_addr = RETURN_ADDR
        self.count = 0
        self.low_sp = self.stack_top
        self._sizes: dict[tuple[int, int], int] = {}
        uc.hook_add(UC_HOOK_BLOCK, self._on_block)
        uc.hook_add(UC_HOOK_MEM_WRITE, self._on_stack_write, begin=self.stack_top - (16 << 10), end=self.stack_top - 1)

    def _on_block(self, uc, address, size, user) -> None:
        n = self._sizes.get((address, size))
        if n is None:
            insns = list(self.cs.disasm(bytes(uc.mem_read(address, size)), address))
            if sum(i.size for i in insns) != size:
                raise PeerError(f"cannot decode the block at 0x{address:08x}")
            n = self._sizes[(address, size)] = len(insns)
        self.count += n

    def _on_stack_write(self, uc, access, address, size, value, user) -> None:
        self.low_sp = min(self.low_sp, address)

    def call(self, name: str, *args: int) -> tuple[int, int]:
        """(instructions, r0) of one call with integer args."""
        from unicorn import UcError
        from unicorn.arm_const import UC_ARM_REG_LR, UC_ARM_REG_PC, UC_ARM_REG_R0, UC_ARM_REG_SP
        uc = self.uc
        for i, v in enumerate(args):
            uc.reg_write(UC_ARM_REG_R0 + i, v & 0xFFFFFFFF)
        uc.reg_write(UC_ARM_REG_SP, self.stack_top)
        uc.reg_write(UC_ARM_REG_LR, self.return_addr | 1)
        c0 = self.count
        try:
            uc.emu_start(self.image.symbol(name) | 1, self.return_addr, count=50_000_000)
        except UcError as exc:
            pc = uc.reg_read(UC_ARM_REG_PC)
            raise PeerError(f"{self.image.path}: fault {exc} at 0x{pc:08x} ({self.image.function_at(pc)})") from None
        if uc.reg_read(UC_ARM_REG_PC) & ~1 != self.return_addr:
            raise PeerError(f"{self.image.path}: {name} did not return")
        return self.count - c0, uc.reg_read(UC_ARM_REG_R0)

    def write_floats(self, symbol: str, x: np.ndarray) -> int:
        addr = self.image.symbol(symbol)
        self.uc.mem_write(addr, np.asarray(x, dtype="<f4").tobytes())
        return addr

    def read_floats(self, addr: int, n: int) -> np.ndarray:
        return np.frombuffer(bytes(self.uc.mem_read(addr, 4 * n)), dtype="<f4").copy()


def measure(h: Harness, X: np.ndarray, k: int) -> tuple[list[int], np.ndarray, int]:
    """Instructions of each call, the outputs (len(X), k) and the stack used, for harness h."""
    r = Runner(h.elf)
    out_addr = r.image.symbol("peer_out")
    counts, outs = [], []
    for x in X:
        xa = r.write_floats("peer_x", x)
        if h.function == "edp_model_run":
            model = struct.unpack("<I", bytes(r.uc.mem_read(r.image.symbol("edp_app_model"), 4)))[0]
            n, res = r.call("edp_model_run", model, xa)
        else:
            n, res = r.call("peer_run", xa, out_addr)
            res = out_addr
        counts.append(n)
        outs.append(r.read_floats(res, k))
    return counts, np.array(outs, dtype=np.float32), r.stack_top - r.low_sp


def _inputs(n: int, model: DeviceModel) -> np.ndarray:
    from ..datasets import digits_split
    x = digits_split(0).X_test[:n].astype(np.float32)
    lo, hi = model.input_range if model.input_range is not None else (-np.inf, np.inf)
    return np.clip(x, np.float32(lo), np.float32(hi)).astype(np.float32)


def run(n: int = 60, models: tuple[str, ...] = MODELS, download: bool = True,
        progress: Callable[[str], None] | None = None) -> dict:
    """Per model and peer: instructions (longest and mean of n inputs), flash, RAM, stack, and the
    largest difference from the NumPy reference. Raises PeerError when a peer's outputs disagree."""
    from ..model import cgen, reference
    say = progress or (lambda msg: None)
    rows = []
    for name in models:
        model = cgen.read(project_root() / "firmware" / "model" / f"{name}.c")
        say(f"peers: building {name}")
        harnesses = build(name, model, download)
        X = _inputs(n, model)
        ref = reference.run(model, X)
        row: dict[str, Any] = {"model": name, "head": model.head, "nets": len(model.nets), "macs": model.macs,
                               "inputs": n, "peers": {}}
        for peer, h in harnesses.items():
            say(f"peers: {name} on {peer}")
            counts, out, stack = measure(h, X, model.n_classes)
            diff = float(np.max(np.abs(out.astype(np.float64) - ref)))
            exact = bool(np.array_equal(out.view(np.uint32), ref.view(np.uint32)))
            ok = exact if peer == "edgedp" else diff <= (0.0 if model.head == "votes" else TOLERANCE)
            if not ok:
                raise PeerError(f"{name} on {peer}: outputs differ from the NumPy reference by {diff:g}")
            row["peers"][peer] = {"counted": h.function, "instructions": max(counts),
                                  "instructions_mean": float(np.mean(counts)),
                                  "per_mac": max(counts) / model.macs, "flash_bytes": h.flash,
                                  "ram_bytes": h.ram, "stack_bytes": stack, "max_abs_diff": diff,
                                  "bit_exact": exact}
        e = row["peers"]["edgedp"]["instructions"]
        row["ratio_cmsis_dsp"] = e / row["peers"]["cmsis_dsp"]["instructions"]
        row["ratio_emlearn"] = e / row["peers"]["emlearn"]["instructions"]
        if model.head == "votes":
            row["cmsis_dsp_calls_per_net"] = {
                "arm_mat_vec_mult_f32": len(model.nets[0].layers), "arm_add_f32": len(model.nets[0].layers),
                "arm_clip_f32": len(model.nets[0].layers) - 1, "arm_max_f32": 1}
        rows.append(row)
    return {"cmsis_dsp": "-".join(CMSIS_DSP), "emlearn": _emlearn_version(), "flags": " ".join(_arm_flags()),
            "tolerance": TOLERANCE, "models": rows}


def _emlearn_version() -> str:
    from importlib.metadata import version
    return version("emlearn")


def markdown(res: dict) -> str:
    out = [f"CMSIS-DSP {res['cmsis_dsp'].split('-')[-1]} and emlearn {res['emlearn']}, flags `{res['flags']}`", "",
           "| model | multiply-adds | edgedp instr. | CMSIS-DSP f32 instr. | emlearn instr. | edgedp / CMSIS-DSP | "
           "edgedp / emlearn | flash B (edgedp / CMSIS-DSP / emlearn) | RAM B | stack B | max abs diff from reference "
           "(edgedp / CMSIS-DSP / emlearn) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["models"]:
        p = r["peers"]
        trio = lambda key, fmt="{:,}": " / ".join(fmt.format(p[q][key]) for q in PEERS)  # noqa: E731
        out.append(f"| {r['model']} | {r['macs']:,} | {p['edgedp']['instructions']:,} | "
                   f"{p['cmsis_dsp']['instructions']:,} | {p['emlearn']['instructions']:,} | "
                   f"{r['ratio_cmsis_dsp']:.2f} | {r['ratio_emlearn']:.2f} | {trio('flash_bytes')} | "
                   f"{trio('ram_bytes')} | {trio('stack_bytes')} | {trio('max_abs_diff', '{:.1e}')} |")
    return "\n".join(out)
