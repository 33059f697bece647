"""One direction of dependency in the host package (LAYERS below; ARCHITECTURE.md, "The layering
rule", quotes it): every module's imports, function-local ones included, point to its own layer or below, and no two
modules import each other through any chain."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "host" / "edgedp"

LAYERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("paths", "schema", "schema_gen", "version", "trust", "datasets"),
     "leaves: paths, the wire schema and its generator, the version, whose files to trust, the records"),
    (("mech",), "the mechanism: types, lattice, modes, law, keystream (chacha), reference"),
    (("device",), "the wire and its user: frames, protocol, links, targets, client"),
    (("model", "train", "fleet"), "models for the device; DP-SGD; the fleet's keys and registry"),
    (("analysis", "bench", "dashboard"), "what is measured about them, and the fleet's dashboard"),
    (("cli",), "the command line"),
    (("",), "edgedp/__init__.py: the public API (re-exports)"),
)
"""The layering rule, lowest layer first: a module imports its own layer and lower ones (parts of
one layer may use each other; a circle between them is still refused below). This table is the
rule's one statement; ARCHITECTURE.md quotes it as `layer_table()` renders it
(tests/docs/test_layering.py keeps the quote equal)."""

LAYER: dict[str, int] = {part: i for i, (parts, _) in enumerate(LAYERS) for part in parts}


def layer_table() -> str:
    """LAYERS as ARCHITECTURE.md quotes it: one line per layer, lowest first."""
    return "\n".join(f"{i}  {', '.join(p or 'edgedp' for p in parts):<45} {what}"
                     for i, (parts, what) in enumerate(LAYERS)) + "\n"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def imports(name: str, source: str | None = None) -> set[str]:
    """edgedp modules that module `name` (its file, or `source`) imports anywhere in its body."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports(name) for name in MODULES}


def part(name: str) -> str:
    return name.split(".")[1] if "." in name else ""


def test_every_part_has_a_layer() -> None:
    assert {part(m) for m in MODULES} <= set(LAYER), sorted({part(m) for m in MODULES} - set(LAYER))


def test_no_upward_import() -> None:
    bad = []
    for name, targets in GRAPH.items():
        for target in targets:
            a, b = part(name), part(target)
            if a != b and LAYER[b] > LAYER[a]:
                bad.append(f"{name} -> {target}")
    assert bad == []


def test_no_import_circle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []


def test_the_checker_sees_function_local_imports(tmp_path: Path) -> None:
    """An import inside a function body counts (one once hid the analysis/train circle)."""
    source = "def load():\n    from ..train.run import train_model\n    return train_model\n"
    assert imports("edgedp.analysis.report", source) == {"edgedp.train.run"}
