"""Host-side units: frame codec, modes, lattice parameters, input parsing."""
from __future__ import annotations

import math

import numpy as np
import pytest

from edgedp.cli.inputs import read_rows
from edgedp.device import frames
from edgedp.mech import modes
from edgedp.mech.lattice import ConfigError, auto_exponent, exp_neg, make_lattice, quantize
from edgedp.mech.modes import Mode


def test_frame_round_trip_and_reader_skips_noise() -> None:
    wire = frames.encode(0x10, 0x1234, bytes(range(256)))
    assert wire[-1] == 0 and 0 not in wire[:-1]
    r = frames.FrameReader()
    got = r.feed(b"\x00banner line\r\n\x00" + wire[:5]) + r.feed(wire[5:])
    assert len(got) == 1 and got[0].seq == 0x1234 and got[0].body == bytes(range(256))
    assert r.discarded == 1


def test_frame_decode_rejects_bad_crc() -> None:
    wire = bytearray(frames.encode(1, 1, b"abc"))
    wire[3] ^= 0x40
    with pytest.raises(frames.FrameError):
        frames.decode(bytes(wire[:-1]))


@pytest.mark.parametrize("text,kind,arg", [("full", 0, 0), ("topk:5", 1, 5), ("LABEL", 2, 0), ("bucket", 3, 0),
                                           ("round:3", 4, 3), ("simplex", 5, 0)])
def test_mode_parse(text: str, kind: int, arg: int) -> None:
    m = Mode.parse(text)
    assert (m.kind, m.arg) == (kind, arg)
    assert Mode.parse(str(m)) == m


@pytest.mark.parametrize("bad", ["topk", "topk:0", "topk:99", "round:7", "label:2", "median"])
def test_mode_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        Mode.parse(bad)


def test_auto_lattice_meets_the_slack_rule() -> None:
    for k in (1, 10, 100, 1000):
        for sens in (0.5, 2.0, 40.0):
            m = auto_exponent(k, sens)
            assert k * 2.0 ** -m <= sens / 256 < k * 2.0 ** -(m - 1)


def test_lattice_scale_and_tables() -> None:
    lat = make_lattice(10, 1_000_000, 2.0, 0.0, 1.0)
    assert lat.m == 11 and (lat.lo, lat.hi) == (0, 2048)
    assert lat.t == pytest.approx((2.0 * 2048 + 10) / 1.0)
    assert 2 ** lat.J <= lat.t < 2 ** (lat.J + 1)


@pytest.mark.parametrize("kw", [dict(k=0), dict(k=1025), dict(sensitivity=0.0), dict(lo=1.0, hi=0.0),
                                dict(epsilon_micro=0), dict(k=1, epsilon_micro=1_000_000_000), dict(sensitivity=float("nan"))])
def test_lattice_rejects_what_the_device_rejects(kw: dict) -> None:
    args = dict(k=10, epsilon_micro=1_000_000, sensitivity=2.0, lo=0.0, hi=1.0) | kw
    with pytest.raises(ConfigError):
        make_lattice(**args)


def test_exp_neg_is_accurate() -> None:
    for x in np.linspace(0, 1, 1001):
        assert exp_neg(float(x)) == pytest.approx(math.exp(-x), rel=1e-15, abs=0)


def test_quantize_rounds_half_away_and_clamps() -> None:
    lat = make_lattice(4, 1_000_000, 2.0, 0.0, 1.0, m=2)
    q = quantize(np.array([0.125, 0.375, -3.0, 7.0]), lat, 0.0, 1.0)
    assert q.tolist() == [1, 2, 0, 4]


def test_simplex_sums_to_one_and_is_nonnegative() -> None:
    lat = make_lattice(7, 1_000_000, 2.0, 0.0, 1.0)
    rng = np.random.default_rng(0)
    y = rng.integers(-3000, 5000, size=(200, 7))
    p = modes.simplex(y, lat)
    assert (p >= 0).all() and (p.sum(axis=1) == 2 ** lat.m).all()


def test_topk_orders_by_noisy_value_then_index() -> None:
    lat = make_lattice(5, 1_000_000, 2.0, 0.0, 1.0)
    y = np.array([[5000, 7000, 7000, -20, 3]])
    idx, val = modes.topk(y, 3, lat)
    assert idx.tolist() == [[1, 2, 0]] and val.tolist() == [[lat.hi, lat.hi, lat.hi]]


def test_read_rows_formats(tmp_path) -> None:
    a = np.random.default_rng(0).random((3, 4))
    np.save(tmp_path / "a.npy", a)
    np.savetxt(tmp_path / "a.csv", a, delimiter=",")
    np.savez(tmp_path / "a.npz", probs=a)
    for name in ("a.npy", "a.csv", "a.npz"):
        assert np.allclose(read_rows(str(tmp_path / name)), a)
    with pytest.raises(ValueError, match="does not exist"):
        read_rows(str(tmp_path / "missing.npy"))
    (tmp_path / "bad.csv").write_text("1,2,x\n")
    with pytest.raises(ValueError, match="not numeric"):
        read_rows(str(tmp_path / "bad.csv"))
