"""The typed wire schema: sizes checked on both sides, one answer type for device and reference."""
from __future__ import annotations

import ast
import hashlib
import hmac
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from edgedp.device import protocol as P
from edgedp.device.errors import TransportError
from edgedp.mech.lattice import MAX_CLASSES, MICRO, to_epsilon, to_micro
from edgedp.mech.modes import MODE_BUCKET, MODE_LABEL, MODE_TOPK, Mode
from edgedp.mech.reference import ReferenceDevice

MODES = ("full", "topk:1", "topk:3", "topk:32", "label", "bucket", "round:0", "round:2", "simplex")


def wire_answer(r: P.QueryResult, remaining: int = 5 * MICRO, ticks: int = 1234) -> bytes:
    """The QUERY answer body a device sends for r (docs/protocol.md, firmware mech.c)."""
    head = P.QUERY_HEAD.pack(remaining, ticks, r.m, r.mode.kind, r.k)
    if r.mode.kind == MODE_TOPK:
        items = np.zeros(len(r.lattice), dtype=P.TOPK_ITEM)
        items["i"], items["v"] = r.indices, r.lattice
        return head + items.tobytes()
    if r.mode.kind == MODE_LABEL:
        return head + struct.pack("<H", r.label)
    if r.mode.kind == MODE_BUCKET:
        return head + struct.pack("<HB", r.label, r.level)
    return head + r.lattice.astype("<i4").tobytes()


@pytest.mark.parametrize("mode", MODES)
def test_reference_answer_survives_the_wire(mode: str) -> None:
    """Device and reference answers are the same type and compare field by field."""
    ref = ReferenceDevice(P.MechConfig(lo=-1.0, hi=2.0, sensitivity=3.0))
    rng = np.random.default_rng(1)
    for k in (1, 3, 10, 40):
        want = ref.query(rng.uniform(-1.5, 2.5, k), mode)
        got = P.parse_query(wire_answer(want), Mode.parse(mode))
        assert got.same_answer(want) and want.same_answer(got)
        assert (got.remaining_micro, got.ticks) == (5 * MICRO, 1234) and want.remaining is None
        assert got.remaining == 5.0
        if want.values is not None:
            assert np.array_equal(got.values, want.values)


def test_a_changed_integer_is_a_different_answer() -> None:
    ref = ReferenceDevice()
    want = ref.query(np.full(5, 0.2), "topk:2")
    other = P.parse_query(wire_answer(want), Mode.parse("topk:2"))
    other.lattice = other.lattice + 1
    assert not other.same_answer(want)
    assert not want.same_answer(ReferenceDevice().query(np.full(5, 0.2), "full"))


@pytest.mark.parametrize("mode", MODES)
def test_short_or_long_answers_raise(mode: str) -> None:
    want = ReferenceDevice().query(np.linspace(0, 1, 8), mode)
    body = wire_answer(want)
    for bad in (body[:-1], body + b"\x00", body[:10]):
        with pytest.raises(TransportError, match="malformed QUERY"):
            P.parse_query(bad, Mode.parse(mode))


def test_answer_in_another_mode_raises() -> None:
    body = wire_answer(ReferenceDevice().query(np.linspace(0, 1, 4), "label"))
    with pytest.raises(TransportError, match="mode"):
        P.parse_query(body, Mode.parse("bucket"))


def test_fixed_bodies_are_checked() -> None:
    budget = P.Budget.FMT.pack(1, 2, 3, 4, 5, 6, 7, 8, 0, 1, MICRO, 0.0, 1.0, 2.0, P.M_AUTO)
    b = P.Budget.parse(budget)
    assert b.config == P.MechConfig() and b.caps == P.Caps(3, 5) and b.m is None
    for bad in (budget[:-1], budget + b"\x00"):
        with pytest.raises(TransportError, match="BUDGET"):
            P.Budget.parse(bad)
    with pytest.raises(TransportError, match="admin"):
        P.AdminAnswer.parse(b"\x01" * 40)
    assert P.AdminAnswer.parse(b"\x00" + struct.pack("<Q", 9) + bytes(32)).counter == 9


def test_state_and_admin_answers_are_checked_against_the_key() -> None:
    """A STATE answer counts only with its tag over the host's challenge; an admin answer only
    with its tag over the nonce and the tag of the frame it answers."""
    key, challenge = bytes(range(32)), b"c" * 16
    body = b"n" * 16 + P.Budget.FMT.pack(1, 2, 3, 4, 5, 6, 7, 8, 0, 1, MICRO, 0.0, 1.0, 2.0, P.M_AUTO) + \
        struct.pack("<III", 5, 60, 100)
    tag = hmac.new(key, b"EDPS" + challenge + body, hashlib.sha256).digest()
    st = P.State.parse(body + tag, key, challenge)
    assert st is not None and st.nonce == b"n" * 16 and st.budget.caps == P.Caps(3, 5)
    assert st.rate == P.Rate(5, 60, 100)
    assert P.State.parse(body + tag, key, b"d" * 16) is None  # an answer to another challenge (replay)
    assert P.State.parse(body[:-1] + b"\x01" + tag, key, challenge) is None  # rewritten
    assert P.State.parse(body + tag, bytes(32), challenge) is None
    head = b"\x00" + struct.pack("<Q", 4)
    t = hmac.new(key, b"EDPA" + bytes([P.CONFIG]) + b"n" * 16 + b"f" * 32 + head, hashlib.sha256).digest()
    ans = P.AdminAnswer.parse(head + t)
    assert ans.authentic(key, P.CONFIG, b"n" * 16, b"f" * 32)
    assert not ans.authentic(key, P.CONFIG, b"n" * 16, b"g" * 32)  # moved to another frame
    assert not ans.authentic(key, P.RESET_BUDGET, b"n" * 16, b"f" * 32)
    assert not P.AdminAnswer(9, 4, t).authentic(key, P.CONFIG, b"n" * 16, b"f" * 32)  # result rewritten
    with pytest.raises(TransportError, match="LOCAL"):
        P.LocalAnswer.parse(b"\x00" * 5)
    with pytest.raises(TransportError, match="SAMPLE"):
        P.parse_sample(struct.pack("<bBH", 11, 20, 3) + b"\x00" * 8)
    assert P.parse_sample(struct.pack("<bBHii", 11, 20, 2, -5, 7)).noise.tolist() == [-5, 7]
    with pytest.raises(TransportError, match="NAIVE"):
        P.NaiveAnswer.parse(struct.pack("<IH", 1, 2) + b"\x00" * 4)


def test_info_parses_and_rejects_cut_text() -> None:
    sha = bytes(range(32))
    body = P.Info.FMT.pack(2, 1, 1, 1, 0, 0, 1024, 168_000_000, 3, 60, 0, 4096, 0, 1, 2, 1, 10, 2, 8, 8, 0, 0, sha) + \
        b"\x050.4.0" + b"\x04qemu" + b"\x05probe"
    i = P.Info.parse(body)
    assert (i.build, i.store, i.firmware_version, i.board, i.max_classes) == ("test", "fresh", "0.4.0", "qemu", 1024)
    assert i.rate == P.Rate(3, 60, 0) and i.rx_buffer == 4096
    assert (i.noise_entropy, i.nonce_entropy, i.entropy) == ("ok", "failed", "failed")
    assert i.model == P.ModelInfo("probe", "int8", "votes", (8, 8), 10, sha.hex()) and i.model.n_features == 64
    v1 = struct.pack("<BBBBHBBIIII", 1, 0, 1, 1, 1024, 0, 1, 168_000_000, 3, 60, 0) + b"\x050.3.0" + b"\x04qemu"
    with pytest.raises(TransportError, match="INFO version 1 .firmware 0.3.0 or older.; this host reads version 2"):
        P.Info.parse(v1)
    for bad in (body[:-1], body + b"x", body[:P.Info.FMT.size + 1]):
        with pytest.raises(TransportError, match="INFO"):
            P.Info.parse(bad)


def test_requests_are_size_checked_before_sending() -> None:
    assert len(P.pack_vector(np.zeros(MAX_CLASSES), Mode(0))) == 4 + 4 * MAX_CLASSES
    for n in (0, MAX_CLASSES + 1):
        with pytest.raises(ValueError, match="1..1024"):
            P.pack_vector(np.zeros(n), Mode(0))
    assert len(P.SampleRequest(MICRO, 2.0, 10, P.MAX_SAMPLES).pack()) == 13
    with pytest.raises(ValueError, match="SAMPLE"):
        P.SampleRequest(MICRO, 2.0, 10, P.MAX_SAMPLES + 1).pack()


def test_config_payload_layout() -> None:
    payload = P.config_payload(P.MechConfig(250_000, -2.0, 3.0, 4.0, 12), P.Caps(7 * MICRO, 9 * MICRO))
    assert P.CONFIG_FMT.unpack(payload) == (250_000, 7 * MICRO, 9 * MICRO, -2.0, 3.0, 4.0, 12)
    assert P.CONFIG_FMT.unpack(P.config_payload(P.MechConfig(), P.Caps(MICRO)))[-1] == P.M_AUTO


def test_config_equality_is_the_devices() -> None:
    assert P.MechConfig(lo=0.1).same_on_device(P.MechConfig(lo=float(np.float32(0.1))))
    assert not P.MechConfig(lo=0.1).same_on_device(P.MechConfig(lo=0.2))
    assert not P.MechConfig().same_on_device(P.MechConfig(m=10))


def test_epsilon_conversion() -> None:
    assert to_micro(0.1) == 100_000 and to_micro(1.0000004) == MICRO and to_epsilon(1_500_000) == 1.5


def _hand_conversions(source: str) -> list[str]:
    """Expressions in `source` that convert between epsilon and micro-epsilon by hand: a product or
    quotient with MICRO, an epsilon amount (a name saying micro, eps, spent or cap) multiplied or
    divided by 10^6."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            sides = (node.left, node.right)
            micro = any(isinstance(s, ast.Name) and s.id == "MICRO" or
                        isinstance(s, ast.Attribute) and s.attr == "MICRO" for s in sides)
            million = any(isinstance(s, ast.Constant) and s.value == 10**6 for s in sides)
            amount = any(re.search(r"micro|eps|spent|cap", ast.unparse(s), re.I) for s in sides
                         if not isinstance(s, ast.Constant))
            if micro or million and amount:
                found.append(ast.unparse(node))
    return found


def test_epsilon_is_converted_only_by_to_micro_and_to_epsilon() -> None:
    """mech.lattice's to_micro and to_epsilon are the one conversion (the same rounding everywhere);
    no other module multiplies or divides by MICRO or 10^6 on an epsilon amount."""
    assert sorted(_hand_conversions("a = round(epsilon * 1_000_000)\nb = spent / 1e6\nc = q * e / MICRO\n")) == \
        ["epsilon * 1000000", "q * e / MICRO", "spent / 1000000.0"]
    assert _hand_conversions("hz / 1e6\ns * 1e6\n1_000_000 // k\n5 * k\n") == []
    pkg = Path(P.__file__).resolve().parents[1]
    bad = {str(f.relative_to(pkg)): hits for f in sorted(pkg.rglob("*.py"))
           if f != pkg / "mech" / "lattice.py" and (hits := _hand_conversions(f.read_text()))}
    assert bad == {}
