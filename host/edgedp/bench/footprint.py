"""Flash and RAM of the DP core: per module (arm-none-eabi-size), linked, and per configuration.

Three views:

- per module: every core source (``firmware/core/src/<module>.c`` and its architecture parts
  ``arch/<arch>/<module>_<arch>.c``, counted with the module) compiled alone with the firmware's own flags
  (``EDP_ARM_CFLAGS`` from firmware/sources.mk, production ``EDP_TEST_BUILD=0``) and measured
  with ``arm-none-eabi-size`` (text = code + constants, data, bss), before the linker drops
  unused sections;
- linked: the functions and objects each module keeps in a linked image (symbol sizes
  attributed to their source file by ``arm-none-eabi-nm -l``), plus the *DP-core closure*:
  everything reachable by calls from the DP entry points (edp_drbg_*, edp_dlap_*,
  edp_mech_*, edp_budget_*), runtime helpers included (soft-double for the set-up);
- RAM: the DP state structs (DWARF sizes from the ELF: DRBG, plan without its table,
  budget), the per-configuration sampler table (``edp_dlap_t``) and the DP step's worst
  stack depth (``-fstack-usage`` along the call graph).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import build_dir, project_root

ARM_CC = "arm-none-eabi-gcc"
ARM_SIZE = "arm-none-eabi-size"
ARM_NM = "arm-none-eabi-nm"
DP_MODULES = ("drbg", "dlap", "mech", "budget")
"""The DP core proper; device, frame, cobs, crc32, sha256 and store are the protocol/persistence layer."""
DP_ENTRY_PREFIXES = ("edp_drbg_", "edp_dlap_", "edp_mech_", "edp_budget_", "edp_chacha_block", "edp_exp_neg")
# Naked assembly functions report no stack in -fstack-usage: their frames, from the source.
NAKED_STACK = {"edp_chacha_block": 36 + 32, "edp_dlap_noisy": 52 + 8 + 20 + 16}


class FootprintError(RuntimeError):
    pass


@dataclass
class ModuleSize:
    module: str
    text: int
    data: int
    bss: int
    linked_flash: int = 0
    linked_ram: int = 0

    @property
    def flash(self) -> int:
        return self.text + self.data

    @property
    def ram(self) -> int:
        return self.data + self.bss


@dataclass
class Footprint:
    modules: list[ModuleSize]
    image: str
    dp_flash_objects: int           # sum of DP modules' object text + data
    dp_flash_linked: int            # DP modules' symbols kept in the image
    dp_closure_flash: int           # reachable from the DP entry points, runtime helpers included
    dp_closure_runtime: dict[str, int]  # helper (non-core) functions in the closure and their sizes
    ram_state: dict[str, int]       # DP state structs
    table_bytes: int                # per-configuration sampler table (edp_dlap_t)
    dp_stack: int                   # worst stack depth of the DP step (quantize, noise, output)
    dp_stack_path: list[str] = field(default_factory=list)
    setup_stack: int = 0            # worst stack depth of the table set-up (edp_mech_prepare)
    setup_stack_path: list[str] = field(default_factory=list)

    @property
    def dp_ram(self) -> int:
        """State plus the deeper of the two stacks (set-up runs inside a query when k changes)."""
        return sum(self.ram_state.values()) + max(self.dp_stack, self.setup_stack)

    def as_dict(self) -> dict:
        return {
            "image": self.image,
            "modules": [{"module": m.module, "text": m.text, "data": m.data, "bss": m.bss,
                         "flash": m.flash, "ram": m.ram, "linked_flash": m.linked_flash,
                         "linked_ram": m.linked_ram} for m in self.modules],
            "dp_modules": list(DP_MODULES),
            "dp_flash_objects": self.dp_flash_objects,
            "dp_flash_linked": self.dp_flash_linked,
            "dp_closure_flash": self.dp_closure_flash,
            "dp_closure_runtime": self.dp_closure_runtime,
            "dp_ram_state": self.ram_state,
            "dp_stack": self.dp_stack,
            "dp_stack_path": self.dp_stack_path,
            "setup_stack": self.setup_stack,
            "setup_stack_path": self.setup_stack_path,
            "dp_ram": self.dp_ram,
            "table_bytes": self.table_bytes,
        }


def make_vars(path: Path) -> dict[str, str]:
    """`NAME := value` assignments of a makefile fragment (with continuations)."""
    text = path.read_text().replace("\\\n", " ")
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z0-9_]+)\s*:?=\s*(.*)$", line.strip())
        if m:
            out[m.group(1)] = " ".join(m.group(2).split())
    return out


def _run(argv: list[str], cwd: Path) -> str:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise FootprintError(f"{' '.join(argv[:3])} ... failed:\n{r.stderr[-2000:]}")
    return r.stdout


def compile_modules(outdir: Path | None = None) -> dict[str, Path]:
    """Compile each core source alone (production flags); returns source -> object path, the
    source named by its path under firmware/core/src without ``.c`` (``dlap``, ``arch/armv7m/dlap_armv7m``)."""
    if shutil.which(ARM_CC) is None:
        raise FootprintError(f"{ARM_CC} not found (run `make setup`)")
    root = project_root()
    v = make_vars(root / "firmware" / "sources.mk")
    outdir = outdir or build_dir() / "bench" / "obj"
    outdir.mkdir(parents=True, exist_ok=True)
    incs = [f"-I{root / p}" for p in v["EDP_INCLUDES"].split()]
    objs = {}
    for src in v["EDP_CORE_SRCS"].split():
        name = Path(src).relative_to("firmware/core/src").with_suffix("").as_posix()
        obj = outdir / f"{name.replace('/', '_')}.o"
        _run([ARM_CC, *v["EDP_ARM_CFLAGS"].split(), "-DEDP_TEST_BUILD=0", "-fstack-usage", *incs,
              "-c", str(root / src), "-o", str(obj)], root)
        objs[name] = obj
    return objs


def object_sizes(objs: dict[str, Path]) -> list[ModuleSize]:
    """Sizes per module: a module's architecture parts (arch/<arch>/<module>_<arch>) add to it."""
    out = _run([ARM_SIZE, "--format=berkeley", *[str(p) for p in objs.values()]], project_root())
    sizes: dict[str, ModuleSize] = {}
    for line, name in zip(out.splitlines()[1:], objs):
        text, data, bss = (int(x) for x in line.split()[:3])
        mod = name.rsplit("/", 1)[-1].split("_", 1)[0]
        m = sizes.setdefault(mod, ModuleSize(mod, 0, 0, 0))
        m.text, m.data, m.bss = m.text + text, m.data + data, m.bss + bss
    return list(sizes.values())


def stack_usage(objs: dict[str, Path]) -> dict[str, int]:
    """Function -> static frame bytes from the -fstack-usage files next to the objects."""
    frames = dict(NAKED_STACK)
    for obj in objs.values():
        su = obj.with_suffix(".su")
        if not su.exists():
            continue
        for line in su.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 2:
                name = parts[0].rsplit(":", 1)[-1]
                frames[name] = max(frames.get(name, 0), int(parts[1]))
    return frames


@dataclass
class _Symbol:
    name: str
    addr: int
    size: int
    kind: str
    module: str


def linked_symbols(elf: Path) -> list[_Symbol]:
    out = _run([ARM_NM, "-S", "-l", "--defined-only", str(elf)], project_root())
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 4 or not re.fullmatch(r"[0-9a-f]+", parts[1]):
            continue
        addr, size, kind, name = int(parts[0], 16), int(parts[1], 16), parts[2], parts[3]
        loc = parts[4] if len(parts) > 4 else ""
        m = re.search(r"firmware/core/src/(?:arch/\w+/)?([a-z0-9]+)(?:_\w+)?\.c:", loc)
        module = m.group(1) if m else ("runtime" if not loc else Path(loc.split(":")[0]).stem)
        syms.append(_Symbol(name, addr & ~1, size, kind, module))
    return syms


def call_graph(elf: Path, syms: list[_Symbol]) -> dict[str, set[str]]:
    """Direct calls (BL, B.W tail calls, B to another function) between function symbols."""
    from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs
    from elftools.elf.elffile import ELFFile

    funcs = sorted((s for s in syms if s.kind in "Tt" and s.size), key=lambda s: s.addr)
    by_addr = {s.addr: s.name for s in funcs}
    with open(elf, "rb") as fh:
        ef = ELFFile(fh)
        text = ef.get_section_by_name(".text")
        if text is None:
            raise FootprintError(f"{elf} has no .text section")
        base, data = text["sh_addr"], text.data()
    cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
    graph: dict[str, set[str]] = {}
    for f in funcs:
        off = f.addr - base
        if off < 0 or off + f.size > len(data):
            continue
        callees = set()
        for ins in cs.disasm(data[off:off + f.size], f.addr):
            if ins.mnemonic.split(".")[0] in ("bl", "b", "blx") and ins.op_str.startswith("#"):
                target = int(ins.op_str[1:], 16) & ~1
                if target in by_addr and by_addr[target] != f.name:
                    callees.add(by_addr[target])
        graph[f.name] = callees
    return graph


def _closure(graph: dict[str, set[str]], roots: list[str]) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo += graph.get(f, ())
    return seen


def _deepest(graph: dict[str, set[str]], frames: dict[str, int], root: str) -> tuple[int, list[str]]:
    best: dict[str, tuple[int, list[str]]] = {}

    def walk(f: str, stack: tuple[str, ...]) -> tuple[int, list[str]]:
        if f in best:
            return best[f]
        if f in stack:  # recursion: not in the DP core; count once
            return 0, []
        sub = [walk(c, stack + (f,)) for c in graph.get(f, ())]
        depth, path = max(sub, default=(0, []))
        best[f] = (frames.get(f, 0) + depth, [f] + path)
        return best[f]

    return walk(root, ())


def default_image() -> Path:
    """The production image (built or rebuilt if stale), else the QEMU test image."""
    from ..device.errors import TransportError
    from ..device.targets.qemu import ensure_image
    for board in ("stm32f4", "qemu"):
        try:
            return ensure_image(board)
        except TransportError:
            continue
    raise FootprintError("no firmware image could be built (run `make firmware`)")


def measure(elf: Path | None = None) -> Footprint:
    """Footprint of the DP core: production image if built (build/stm32f4), else the QEMU test image."""
    from .trace import Image

    objs = compile_modules()
    modules = object_sizes(objs)
    frames = stack_usage(objs)
    if elf is None:
        elf = default_image()
    syms = linked_symbols(elf)
    flash_kinds, ram_kinds = "TtRr", "BbDd"
    for m in modules:
        mine = [s for s in syms if s.module == m.module]
        m.linked_flash = sum(s.size for s in mine if s.kind in flash_kinds)
        m.linked_ram = sum(s.size for s in mine if s.kind in ram_kinds)
    graph = call_graph(elf, syms)
    roots = [s.name for s in syms if s.kind == "T" and s.name.startswith(DP_ENTRY_PREFIXES)]
    reach = _closure(graph, roots)
    extent = {s.name: (s.addr, s.size) for s in syms if s.kind in "Tt"}
    module_of = {s.name: s.module for s in syms}
    # constant tables of the DP modules (rodata symbols) count as flash too
    rodata = sum(s.size for s in syms if s.kind in "Rr" and s.module in DP_MODULES)
    runtime = {f: extent[f][1] for f in sorted(reach) if f in extent and module_of.get(f) not in DP_MODULES}
    covered: set[int] = set()  # union of address ranges: aliases (__aeabi_dadd = __adddf3) count once
    for f in reach:
        if f in extent:
            a, n = extent[f]
            covered.update(range(a, a + n))
    closure_flash = len(covered) + rodata
    img = Image.load(elf)
    size_of = lambda t: img._structs.get(t, {}).get("__size__", 0)  # noqa: E731
    table = size_of("edp_dlap_t")
    state = {"edp_drbg_t": size_of("edp_drbg_t"),
             "edp_mech_plan_t without its table": size_of("edp_mech_plan_t") - table,
             "edp_budget_t": size_of("edp_budget_t")}
    depth, path = 0, []
    for entry in ("edp_dlap_noisy", "edp_mech_output"):
        d2, p2 = _deepest(graph, frames, entry)
        if d2 > depth:
            depth, path = d2, p2
    sdepth, spath = _deepest(graph, frames, "edp_mech_prepare")
    dp = [m for m in modules if m.module in DP_MODULES]
    return Footprint(modules=modules, image=str(elf.relative_to(project_root()) if elf.is_relative_to(project_root())
                                                 else elf),
                     dp_flash_objects=sum(m.flash for m in dp), dp_flash_linked=sum(m.linked_flash for m in dp),
                     dp_closure_flash=closure_flash, dp_closure_runtime=runtime, ram_state=state,
                     table_bytes=table, dp_stack=depth, dp_stack_path=path, setup_stack=sdepth,
                     setup_stack_path=spath)
