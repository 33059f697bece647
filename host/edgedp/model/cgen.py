"""DeviceModel -> C source linked into the image (firmware/core/include/edgedp/model.h, the public API)."""
from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from .graph import FIELDS, Graph, from_records, record
from .spec import HEADS, Dense, Dense8, DeviceModel, InputQuant, Net, row4


def _f(v: np.float32) -> str:
    """A float32 as an exact C hex literal."""
    if v == 0:
        return "-0.0f" if np.signbit(v) else "0.0f"
    mant, exp = float(v).hex().split("p")
    return mant.rstrip("0").rstrip(".") + "p" + exp + "f"


def _array(ctype: str, name: str, values: np.ndarray, fmt=str, per_line: int = 6) -> str:
    items = [fmt(v) for v in values.ravel()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return f"static const {ctype} {name}[{len(items)}] = {{\n    " + ",\n    ".join(lines) + ",\n};\n"


def digest(model: DeviceModel) -> str:
    """sha256 over the weights as deployed (float32 little-endian, in C order) and the settings."""
    h = hashlib.sha256(f"{model.head}|{model.n_classes}|{model.lo}|{model.hi}|{model.sensitivity}|"
                       f"{model.m}|{model.input_range}".encode())
    if model.quant is not None:
        h.update(f"|int8|{model.quant.mul!r}|{model.quant.add!r}".encode())
    if model.graph is not None:
        _digest_graph(h, model.graph)
    for net in model.nets:
        h.update(net.classes.astype("<u2").tobytes())  # weights in (in, out) order
        for layer in net.layers:
            if isinstance(layer, Dense8):
                h.update(layer.w.tobytes() + layer.b.astype("<i4").tobytes())
                if layer.mult is not None and layer.shift is not None:  # hidden
                    h.update(layer.mult.astype("<i4").tobytes() + layer.shift.tobytes())
                else:
                    assert layer.scale is not None  # the last layer (Dense8)
                    h.update(layer.scale.astype("<f4").tobytes())
            else:
                h.update(layer.w.astype("<f4").tobytes() + layer.b.astype("<f4").tobytes())
    return h.hexdigest()


def _graph_io(g: Graph) -> tuple[int, int, float, float, int, int, int]:
    """The graph's own fields (edp_graph_s8_t): input and output offsets, scales, zero points, arena."""
    ti, to = g.tensors[g.input], g.tensors[g.output]
    return (g.offsets[g.input], g.offsets[g.output], float(np.float32(ti.scale)), float(np.float32(to.scale)),
            ti.zp, to.zp, g.arena_bytes)


def _digest_graph(h, g: Graph) -> None:  # h: hashlib's sha256 object
    """What the device holds of a graph: its fields, every operator's record and arrays."""
    h.update(f"|graph|{_graph_io(g)!r}".encode())
    for op in g.ops:
        h.update(repr(record(g, op)).encode())
        for a, dt in ((op.w, "<i1"), (op.bias, "<i4"), (op.mult, "<i4"), (op.shift, "<i1")):
            h.update(b"-" if a is None else np.ascontiguousarray(a).astype(dt).tobytes())


def _graph_c(model: DeviceModel, g: Graph) -> list[str]:
    out = []
    rows = []
    for i, op in enumerate(g.ops):
        names = []
        for key, ctype, a in (("w", "int8_t", op.w), ("bias", "int32_t", op.bias), ("mult", "int32_t", op.mult),
                              ("shift", "int8_t", op.shift)):
            if a is None:
                names.append("NULL")
                continue
            out.append(_array(ctype, f"g{key}{i}", np.asarray(a), lambda v: str(int(v)), per_line=16))
            names.append(f"g{key}{i}")
        n_q = 0 if op.mult is None else len(op.mult)
        rows.append("{" + ", ".join(map(str, record(g, op))) + ", " + ", ".join(names) + f", {n_q}}}")
    out.append(f"static const edp_op_s8_t ops[{len(rows)}] = {{\n    " + ",\n    ".join(rows) + ",\n};\n")
    out.append(_array("uint16_t", "cls0", np.arange(model.n_classes), lambda v: str(int(v)), per_line=16))
    a_in, a_out, s_in, s_out, z_in, z_out, size = _graph_io(g)
    out.append(f"static int8_t arena[{max(size, 4)}] __attribute__((aligned(4)));\n"
               f"static const edp_graph_s8_t graph = {{{len(g.ops)}, ops, arena, {size}, {a_in}, {a_out}, "
               f"{_f(np.float32(s_in))}, {_f(np.float32(s_out))}, {z_in}, {z_out}, cls0}};\n"
               "static const edp_model_s8_t s8 = {0.0f, 0.0f, NULL, 0, NULL, NULL, 0, &graph};\n")
    return out


def _sha256_literal(hexdigest: str) -> str:
    """The 32 bytes of a sha256 as C initialiser items (edp_model_t.sha256)."""
    return ", ".join(f"0x{b:02x}" for b in bytes.fromhex(hexdigest))


def _padded(w: np.ndarray) -> np.ndarray:
    """An int8 W (in, out) as the device's rows: out x row4(in), zeros after each row's inputs."""
    rows = np.zeros((w.shape[1], row4(w.shape[0])), dtype=np.int8)
    rows[:, :w.shape[0]] = w.T
    return rows


def _net8(t: int, net: Net) -> tuple[list[str], str]:
    out, layers = [], []
    for i, l in enumerate(net.layers):
        assert isinstance(l, Dense8), "an int8 model's nets are int8"
        out.append(_array("int8_t", f"w{t}_{i}", _padded(l.w), per_line=16))
        out.append(_array("int32_t", f"b{t}_{i}", l.b, per_line=8))
        if l.mult is not None and l.shift is not None:  # hidden
            out.append(_array("int32_t", f"mult{t}_{i}", l.mult, per_line=8))
            out.append(_array("uint8_t", f"shift{t}_{i}", l.shift, per_line=16))
            tail = f"mult{t}_{i}, shift{t}_{i}, NULL"
        else:
            assert l.scale is not None  # the last layer (Dense8)
            out.append(_array("float", f"scale{t}_{i}", l.scale, _f))
            tail = f"NULL, NULL, scale{t}_{i}"
        layers.append(f"{{{l.w.shape[0]}, {l.w.shape[1]}, w{t}_{i}, b{t}_{i}, {tail}}}")
    out.append(f"static const edp_dense_s8_t layers{t}[{len(layers)}] = {{{', '.join(layers)}}};\n")
    out.append(_array("uint16_t", f"cls{t}", net.classes, lambda v: str(int(v)), per_line=16))
    return out, f"{{{len(net.layers)}, layers{t}, cls{t}}}"


def generate(model: DeviceModel, source: str = "", warning: str | None = None) -> str:
    """The C data of ``model``; ``warning`` (e.g. why the model is not private) goes in the header."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,32}", model.name):
        raise ValueError("model name: 1-32 characters of [A-Za-z0-9_.-]")
    if model.input_range is None:
        raise ValueError("the model's input range is not declared (--input-range LO HI)")
    in_lo, in_hi = model.input_range
    out = [
        f"/* Generated by `edgedp deploy` from {source or model.name}: do not edit.\n"
        f" * {model.name}: {model.head} head, {len(model.nets)} net(s), {model.n_features} inputs -> "
        f"{model.n_classes} outputs,\n"
        + (f" * int8: {model.macs} int8 weights, {model.flash_bytes} bytes of flash, "
           f"{model.scratch_bytes} bytes of scratch RAM.\n" if model.int8 else
           f" * {model.n_weights} float32 weights ({4 * model.n_weights} bytes of flash), "
           f"{model.scratch_floats} floats of scratch RAM.\n")
        + f" * Inputs clamped to [{in_lo:g}, {in_hi:g}]; output range [{model.lo:g}, {model.hi:g}], "
        f"L1 sensitivity {model.sensitivity:g}.\n"
        f" * sha256 {digest(model)}"
        + (f"\n * WARNING: {warning.replace('*/', '* /')}" if warning else "") + " */\n",
        '#include "edgedp/model.h"\n\n',
    ]
    nets = []
    if model.graph is not None:
        out += _graph_c(model, model.graph)
    for t, net in enumerate(model.nets):
        if model.int8:
            data, entry = _net8(t, net)
            out += data
            nets.append(entry)
            continue
        layers = []
        for i, layer in enumerate(net.layers):
            out.append(_array("float", f"w{t}_{i}", layer.w.T, _f))  # transposed: one row per output
            out.append(_array("float", f"b{t}_{i}", layer.b, _f))
            layers.append(f"{{{layer.w.shape[0]}, {layer.w.shape[1]}, w{t}_{i}, b{t}_{i}}}")
        out.append(f"static const edp_dense_t layers{t}[{len(layers)}] = {{{', '.join(layers)}}};\n")
        out.append(_array("uint16_t", f"cls{t}", net.classes, lambda v: str(int(v)), per_line=16))
        nets.append(f"{{{len(net.layers)}, layers{t}, cls{t}}}")
    kind = "edp_net_s8_t" if model.int8 else "edp_net_t"
    if nets:
        out.append(f"\nstatic const {kind} nets[] = {{\n    " + ",\n    ".join(nets) + ",\n};\n")
    out.append(f"static float scratch[{model.scratch_floats}];\n")
    if model.quant is not None:  # int8
        hidden = (model.act_bytes - row4(model.n_features)) // 2
        out.append(f"static int8_t act[{model.act_bytes}];\nstatic uint32_t xp[{model.xp_words}];\n"
                   f"static const edp_model_s8_t s8 = {{{_f(np.float32(model.quant.mul))}, "
                   f"{_f(np.float32(model.quant.add))}, nets, {hidden}, act, xp, {model.xp_words}, NULL}};\n")
    out.append("\n")
    m = "EDP_M_AUTO" if model.m is None else str(model.m)
    out.append(
        "static const edp_model_t model = {\n"
        f'    "{model.name}", {HEADS.index(model.head)}, {model.n_features}, {model.n_classes}, '
        f"{max(len(model.nets), 1)}, {'NULL' if model.int8 else 'nets'}, scratch,\n"
        f"    {_f(np.float32(model.lo))}, {_f(np.float32(model.hi))}, "
        f"{_f(np.float32(model.sensitivity))}, {m},\n"
        f"    {_f(np.float32(in_lo))}, {_f(np.float32(in_hi))},\n"
        f"    {'&s8' if model.int8 else 'NULL'}, {model.scratch_floats},\n"
        f"    {len(model.shape)}, {{{', '.join(map(str, model.shape))}}},\n"
        f"    {{{_sha256_literal(digest(model))}}},\n}};\n"
        "const edp_model_t *const edp_app_model = &model;\n")
    return "".join(out)


_ARRAY = re.compile(r"static const (float|uint16_t|int8_t|int32_t|uint8_t) (\w+)\[(\d+)\] = \{([^}]*)\};")
_LAYERS = re.compile(r"static const edp_dense(_s8)?_t layers(\d+)\[\d+\] = \{(.*)\};")
_LAYER = re.compile(r"\{(\d+), (\d+), (w\d+_\d+), (b\d+_\d+)\}")
_LAYER8 = re.compile(r"\{(\d+), (\d+), (w\d+_\d+), (b\d+_\d+), (\w+), (\w+), (\w+)\}")
_S8 = re.compile(r"static const edp_model_s8_t s8 = \{(\S+), (\S+), nets, \d+, act, xp, (\d+), NULL\};")
_OPS = re.compile(r"static const edp_op_s8_t ops\[(\d+)\] = \{(.*?)\n\};", re.S)
_OP = re.compile(r"\{([-\d, ]+), (\w+), (\w+), (\w+), (\w+), (\d+)\}")
_GRAPH = re.compile(r"static const edp_graph_s8_t graph = \{(\d+), ops, arena, (\d+), (\d+), (\d+), (\S+), (\S+), "
                    r"(-?\d+), (-?\d+), cls0\};")
_MODEL = re.compile(r'static const edp_model_t model = \{\s*"([^"]+)", (\d+), (\d+), (\d+), (\d+), (?:nets|NULL), '
                    r"scratch,\s*(\S+), (\S+), (\S+), (\S+),\s*(\S+), (\S+),\s*(?:NULL|&s8), (\d+),"
                    r"\s*(\d+), \{([\d, ]+)\},\s*\{([0-9a-fx, ]+)\},\s*\};")
_SIZES = re.compile(r"static float scratch\[(\d+)\];(?:\nstatic int8_t act\[\d+\];\nstatic uint32_t xp\[(\d+)\];)?")


def _value(text: str) -> float:
    t = text.strip().rstrip("f")
    return float(t) if "x" not in t else float.fromhex(t)


def _layer8(arrays: dict, i: str, o: str, w: str, b: str, mult: str, shift: str, scale: str) -> Dense8:
    n_in, n_out = int(i), int(o)
    rows = arrays[w].reshape(n_out, row4(n_in))
    if rows[:, n_in:].any():
        raise ValueError(f"{w}: the padding after each row's {n_in} inputs must be zero")
    get = arrays.get
    return Dense8(rows[:, :n_in].T, arrays[b], get(mult), get(shift), get(scale))


def _read_graph(text: str, arrays: dict, path: str | Path) -> Graph | None:
    ops, g = _OPS.search(text), _GRAPH.search(text)
    if ops is None and g is None:
        return None
    if ops is None or g is None:
        raise ValueError(f"{path}: a graph model needs both its operators and its edp_graph_s8_t")
    recs = []
    for vals, *names, n_q in _OP.findall(ops.group(2)):
        ints = tuple(int(v) for v in vals.split(","))
        if len(ints) != len(FIELDS):
            raise ValueError(f"{path}: an operator has {len(ints)} fields, edp_op_s8_t {len(FIELDS)}")
        got = {k: (None if n == "NULL" else arrays[n]) for k, n in zip(("w", "bias", "mult", "shift"), names)}
        if got["mult"] is not None and len(got["mult"]) != int(n_q):
            raise ValueError(f"{path}: n_q {n_q} declared, {len(got['mult'])} multipliers")
        recs.append((ints, got))
    n_ops, size, a_in, a_out, s_in, s_out, z_in, z_out = g.groups()
    if int(n_ops) != len(recs) or int(ops.group(1)) != len(recs):
        raise ValueError(f"{path}: {n_ops} operators declared, {len(recs)} found")
    return _with_weights(from_records(recs, int(a_in), int(a_out), (_value(s_in), int(z_in)),
                                      (_value(s_out), int(z_out)), int(size)))


def _with_weights(g: Graph) -> Graph:
    """Weights read back in their shapes (conv oc x kh x kw x ic, dwconv kh x kw x oc, fc oc x n)."""
    ops = []
    for op in g.ops:
        if op.w is not None:
            ta, ty = g.tensors[op.a], g.tensors[op.y]
            shape = {"conv": (ty.shape[2],) + op.kernel + (ta.shape[2],), "dwconv": op.kernel + (ty.shape[2],),
                     "fc": (ty.size, ta.size)}[op.kind]
            if op.w.size != int(np.prod(shape)):
                raise ValueError(f"{op.node}: {op.w.size} weights, its shapes need {shape}")
            op = replace(op, w=op.w.astype(np.int8).reshape(shape))
        ops.append(replace(op, bias=None if op.bias is None else op.bias.astype(np.int32),
                           mult=None if op.mult is None else op.mult.astype(np.int32),
                           shift=None if op.shift is None else op.shift.astype(np.int8)))
    return replace(g, ops=tuple(ops))


def read(path: str | Path) -> DeviceModel:
    """The model a generated C file holds (what the image computes), for the host reference."""
    text = Path(path).read_text()
    arrays = {}
    for ctype, name, n, body in _ARRAY.findall(text):
        vals = [v for v in body.replace("\n", " ").split(",") if v.strip()]
        if len(vals) != int(n):
            raise ValueError(f"{path}: {name} has {len(vals)} values, declared {n}")
        arrays[name] = (np.array([_value(v) for v in vals], dtype=np.float32) if ctype == "float"
                        else np.array([int(v) for v in vals], dtype=np.int64))
    nets = []
    for s8, t, body in _LAYERS.findall(text):
        layers: tuple[Dense | Dense8, ...]
        if s8:
            layers = tuple(_layer8(arrays, *f) for f in _LAYER8.findall(body))
        else:
            layers = tuple(Dense(arrays[w].reshape(int(o), int(i)).T, arrays[b]) for i, o, w, b in _LAYER.findall(body))
        nets.append(Net(layers, arrays[f"cls{t}"]))
    q = _S8.search(text)
    m = _MODEL.search(text)
    graph = _read_graph(text, arrays, path)
    if m is None or not (nets or graph):
        raise ValueError(f"{path}: not a model file written by `edgedp deploy`")
    name, head, n_features, n_classes, n_nets, lo, hi, sens, mm, in_lo, in_hi, scratch_floats, rank, dims, sha = \
        m.groups()
    shape = tuple(int(d) for d in dims.split(","))
    if len(shape) != int(rank):
        raise ValueError(f"{path}: input rank {rank} declared, {len(shape)} dims given")
    if int(n_nets) != max(len(nets), 1 if graph else 0):
        raise ValueError(f"{path}: {n_nets} nets declared, {len(nets)} found")
    model = DeviceModel(name, HEADS[int(head)], int(n_classes), tuple(nets), _value(lo), _value(hi),
                        _value(sens), None if mm == "EDP_M_AUTO" else int(mm),
                        (_value(in_lo.rstrip(",")), _value(in_hi.rstrip(","))),
                        InputQuant(_value(q.group(1)), _value(q.group(2))) if q else None, shape, graph)
    if model.n_features != int(n_features):
        raise ValueError(f"{path}: inputs declared {n_features}, layers take {model.n_features}")
    if _sha256_literal(digest(model)) != ", ".join(v.strip() for v in sha.split(",")):
        raise ValueError(f"{path}: the sha256 it declares is not its data's ({digest(model)})")
    # edp_model_wipe zeroes the sizes declared: they must be the arrays', and what the model needs
    sizes = _SIZES.search(text)
    declared = (int(scratch_floats), int(q.group(3)) if q else 0)
    arrays_ = (int(sizes.group(1)), int(sizes.group(2) or 0)) if sizes else None
    if not declared == arrays_ == (model.scratch_floats, model.xp_words):
        raise ValueError(f"{path}: scratch sizes declared {declared}, arrays {arrays_}, "
                         f"the model needs {(model.scratch_floats, model.xp_words)}")
    return model
