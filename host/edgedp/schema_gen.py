"""Generate ``edgedp/schema.py`` from the firmware's C headers: the wire schema has one source.

The C headers (the public ``firmware/core/include/edgedp`` and the core's internal
``firmware/core/src``) are the source of truth. This module reads
their object-like ``#define EDP_*`` constants and the enums listed in ``ENUMS`` and writes
one Python leaf module with the same values under the names without ``EDP_``. A constant
whose comment starts with ``layout:`` lists its fields (``name type`` separated by ``|``;
types u8 u16 u32 u64 i8 i16 i32 f32, ``u8[N]`` for N bytes): the generator checks that they
add up to the constant and writes ``NAME_FMT``, the ``struct.Struct`` of that layout.

``python -m edgedp.schema_gen`` rewrites the module; ``--check`` exits 1 when it is stale
(tests/python/test_schema.py runs the check, so a header change without a regenerated module
fails the test suite, not a session against QEMU).
"""
from __future__ import annotations

import argparse
import ast
import operator
import re
import struct
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from .paths import project_root

HEADERS = ("options.h", "proto.h", "error.h", "budget.h", "model.h", "mech.h", "dlap.h", "store.h", "port.h")
"""Headers read, in this order (a constant may use any constant defined before it); each is
looked up in HEADER_DIRS."""
HEADER_DIRS = ("include/edgedp", "src")
"""Where the headers are, under firmware/core: the public API, then the internal headers."""
OPTIONS = ("EDP_MAX_CLASSES", "EDP_MAX_TOPK", "EDP_MAX_ROUND_DIGITS", "EDP_FIRMWARE_VERSION")
"""options.h entries the host relies on (their defaults: an image built with other values
must say so through INFO, as max_classes does). EDP_FIRMWARE_VERSION is the project's one
version: the package's (edgedp.version, pyproject.toml's dynamic version), CMake's and
library.json's (tests/python/test_version.py)."""
ENUMS = {
    "edp_frame_type": ("FrameType", "EDP_T_", "frame types (proto.h)"),
    "edp_error": ("ErrorCode", "EDP_", "error codes as carried on the wire: the positive value of EDP_ERR_* (error.h)"),
    "edp_mode": ("OutputMode", "EDP_MODE_", "output modes (mech.h)"),
    "edp_store_state": ("StoreState", "EDP_STORE_", "store state found at boot (store.h)"),
    "edp_tick_kind": ("TickKind", "EDP_TICK_", "tick unit of the answers' ticks (port.h)"),
    "edp_audit_event": ("AuditEvent", "EDP_AUDIT_", "audit log events (store.h)"),
    "edp_info_entropy": ("EntropyHealth", "EDP_INFO_ENTROPY_", "health of a randomness source in INFO (proto.h)"),
    "edp_info_model": ("ModelKind", "EDP_INFO_MODEL_", "kind of the model in INFO (proto.h)"),
    "edp_model_head": ("ModelHead", "EDP_MODEL_", "model heads (model.h)"),
}
TYPES = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i8": "b", "i16": "h", "i32": "i", "f32": "f"}
OUTPUT = Path(__file__).with_name("schema.py")


class SchemaError(ValueError):
    """A header the generator cannot read, or a layout that does not add up to its size."""


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str          # as written: u32, u8[16] (its count resolved)
    code: str           # struct code: I, 16s

    @property
    def size(self) -> int:
        return struct.calcsize("<" + self.code)


@dataclass
class Constant:
    name: str           # Python name (C name without EDP_)
    value: int | float | bytes | str
    comment: str
    header: str
    layout: tuple[Field, ...] | None = None
    hexadecimal: bool = False

    @property
    def fmt(self) -> str:
        assert self.layout is not None
        return "<" + "".join(f.code for f in self.layout)


@dataclass
class Enum:
    name: str
    doc: str
    members: list[tuple[str, int, str]] = field(default_factory=list)  # (name, wire value, comment)


@dataclass
class Schema:
    constants: dict[str, Constant]
    enums: dict[str, Enum]


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift,
        ast.RShift: operator.rshift, ast.BitOr: operator.or_}


def _evaluate(text: str, env: dict[str, int | float | bytes | str], where: str) -> int | float | bytes | str:
    """The value of a C constant expression of integers, doubles, constants in env, a brace
    list of character literals (bytes), or one plain string literal (str: printable ASCII, no
    escapes)."""
    t = text.strip()
    if re.fullmatch(r'"[ !#-\[\]-~]*"', t):
        return t[1:-1]
    if t.startswith('"'):
        raise SchemaError(f"{where}: cannot read {text!r} (a string constant is printable ASCII without escapes)")
    chars = re.fullmatch(r"\{\s*('(?:[^'\\]|\\.)'\s*(?:,\s*'(?:[^'\\]|\\.)'\s*)*)\}", t)
    if chars:
        return bytes(ord(ast.literal_eval(c)) for c in re.findall(r"'(?:[^'\\]|\\.)'", chars.group(1)))
    t = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uU][lL]*\b", r"\1", t)     # 1u, 0xFFu
    t = re.sub(r"\b(\d+\.\d*(?:[eE][-+]?\d+)?)[fF]\b", r"\1", t)      # 1.0f
    try:
        tree = ast.parse(t, mode="eval")
    except SyntaxError:
        raise SchemaError(f"{where}: cannot read {text!r}") from None

    def ev(n: ast.AST) -> int | float:
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.Name) and n.id in env and isinstance(env[n.id], (int, float)):
            return env[n.id]  # type: ignore[return-value]  # the isinstance above does not narrow env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            a, b = ev(n.left), ev(n.right)
            return a // b if isinstance(a, int) and isinstance(b, int) else a / b   # C division
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.left), ev(n.right))
        raise SchemaError(f"{where}: cannot evaluate {ast.unparse(n)!r} in {text!r}")
    return ev(tree.body)


def _layout(text: str, env: dict, where: str) -> tuple[Field, ...]:
    out = []
    for part in text.split("|"):
        m = re.fullmatch(r"\s*(\w+)\s+(\w+)(?:\[(\w+)\])?\s*", part)
        if not m or m.group(2) not in TYPES or (m.group(3) and m.group(2) != "u8"):
            raise SchemaError(f"{where}: bad layout field {part.strip()!r} (name type, type one of "
                              f"{' '.join(TYPES)} or u8[N])")
        name, ctype, count = m.groups()
        if count is None:
            out.append(Field(name, ctype, TYPES[ctype]))
        else:
            n = _evaluate(count, env, where)
            if not isinstance(n, int) or n < 1:
                raise SchemaError(f"{where}: bad byte count {count!r}")
            out.append(Field(name, f"u8[{n}]", f"{n}s"))
    return tuple(out)


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(EDP_\w+)(?![\w(])[ \t]*(.*)$")
_ENUM = re.compile(r"\benum\s+(edp_\w+)\s*\{(.*?)\}\s*;", re.S)
_MEMBER = re.compile(r"(EDP_\w+)\s*=\s*([^,/\n]+?)\s*,?\s*(?:/\*(.*?)\*/)?\s*(?=EDP_|$)", re.S)


def _comment(rest: str, lines: list[str], i: int) -> tuple[str, str, int]:
    """Split a define's tail into value and comment (which may run over the next lines)."""
    if "/*" not in rest:
        return rest.strip(), "", i
    value, _, com = rest.partition("/*")
    while "*/" not in com:
        i += 1
        com += " " + lines[i].strip().lstrip("*").strip()
    return value.strip(), " ".join(com.partition("*/")[0].split()), i


def header_path(core: Path, header: str) -> Path:
    """Where ``header`` is under the core folder ``core`` (HEADER_DIRS, first match)."""
    for d in HEADER_DIRS:
        if (core / d / header).is_file():
            return core / d / header
    raise SchemaError(f"{header}: not in {', '.join(str(core / d) for d in HEADER_DIRS)}")


def parse(core_dir: Path | None = None) -> Schema:
    """The schema as the headers under ``core_dir`` (default: firmware/core) state it."""
    core = core_dir or project_root() / "firmware" / "core"
    env: dict[str, int | float | bytes | str] = {}
    constants: dict[str, Constant] = {}
    enums: dict[str, Enum] = {}
    for header in HEADERS:
        text = header_path(core, header).read_text()
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            m = _DEFINE.match(lines[i])
            where = f"{header}:{i + 1}"
            if m and m.group(2).strip() and (header != "options.h" or m.group(1) in OPTIONS):
                cname, rest = m.groups()
                value_text, com, i = _comment(rest, lines, i)
                if cname in env:
                    raise SchemaError(f"{where}: {cname} defined twice")
                value = _evaluate(value_text, env, where)
                env[cname] = value
                c = Constant(cname[len("EDP_"):], value, com, header, hexadecimal="0x" in value_text.lower())
                if com.startswith("layout:"):
                    c.layout = _layout(com[len("layout:"):], env, where)
                    size = sum(f.size for f in c.layout)
                    if size != value:
                        raise SchemaError(f"{where}: the layout of {cname} adds up to {size} bytes, "
                                          f"the constant says {value!r}")
                    c.comment = ""
                constants[c.name] = c
            i += 1
        for m in _ENUM.finditer(text):
            if m.group(1) not in ENUMS:
                continue
            pyname, prefix, doc = ENUMS[m.group(1)]
            e = Enum(pyname, doc)
            body = re.sub(r"\n\s*\*", " ", m.group(2))
            for name, val, com in _MEMBER.findall(body):
                v = _evaluate(val, env, f"{header}: enum {m.group(1)}")
                if not isinstance(v, int):
                    raise SchemaError(f"{header}: enum {m.group(1)}: {name} = {val!r} is not an integer")
                env[name] = v
                if m.group(1) == "edp_error":
                    if v == 0:
                        continue
                    v = -v
                e.members.append((name[len(prefix):], int(v), " ".join((com or "").split())))
            enums[pyname] = e
    missing = [n for n in (x[0] for x in ENUMS.values()) if n not in enums]
    if missing:
        raise SchemaError(f"enums not found in the headers: {', '.join(missing)}")
    return Schema(constants, enums)


def _literal(c: Constant) -> str:
    return f"0x{c.value:X}" if c.hexadecimal and isinstance(c.value, int) else repr(c.value)


def render(schema: Schema) -> str:
    """The text of edgedp/schema.py."""
    out = ['"""The wire schema, GENERATED from the headers of firmware/core (include/edgedp, src) by `python -m edgedp.schema_gen`:',
           "do not edit (change the header and regenerate; tests/python/test_schema.py fails on any drift).",
           "",
           "Sizes are in bytes; ``*_FMT`` is the little-endian struct of the layout of the same name.",
           '"""',
           "from __future__ import annotations",
           "",
           "import struct",
           "from enum import IntEnum",
           ""]
    header = None
    for c in schema.constants.values():
        if c.header != header:
            header = c.header
            out += ["", f"# ---- {header}"]
        out += textwrap.wrap(c.comment, 96, initial_indent="# ", subsequent_indent="# ")
        if c.layout is not None:
            out += textwrap.wrap(" | ".join(f"{f.name} {f.ctype}" for f in c.layout), 96,
                                 initial_indent="# ", subsequent_indent="#   ")
        out.append(f"{c.name} = {_literal(c)}")
        if c.layout is not None:
            out.append(f"{c.name}_FMT = struct.Struct({c.fmt!r})")
    for e in schema.enums.values():
        out += ["", "", f"class {e.name}(IntEnum):", f'    """{e.doc[0].upper() + e.doc[1:]}."""', ""]
        for name, v, com in e.members:
            line = f"    {name} = " + (f"0x{v:02X}" if e.name == "FrameType" else str(v))
            if com and len(line) + len(com) + 4 > 100:
                out += textwrap.wrap(com, 96, initial_indent="    # ", subsequent_indent="    # ")
            elif com:
                line += f"  # {com}"
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m edgedp.schema_gen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed module differs")
    ap.add_argument("--output", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    try:
        text = render(parse())
    except (SchemaError, OSError) as exc:
        print(f"schema_gen: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if not args.output.exists() or args.output.read_text() != text:
            print(f"schema_gen: {args.output} is stale: run python -m edgedp.schema_gen", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
