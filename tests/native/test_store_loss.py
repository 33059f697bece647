"""Store loss, replay of captured admin frames, the flash high-water log and reseed retry,
on the native port (issue 9 items 1 and 4).

The posix port keeps the store and the RAM NOR model of the flash log in two files
(EDP_STORE_FILE, EDP_FLASH_FILE): deleting the store file is a lost backup domain (dead
VBAT, or a power cycle on a board with VBAT tied to VDD) while the flash survives."""
from __future__ import annotations

import json
import re
import struct
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from edgedp.cli import main
from edgedp.device import admin, frames, protocol as P
from edgedp.device.errors import DeviceError, TransportError
from edgedp.device.protocol import Caps, MechConfig
from edgedp.mech.lattice import MICRO

from ..conftest import PosixDevice
from ..helpers import ROOT, TEST_EPOCH

pytestmark = pytest.mark.native
X = np.array([0.1, 0.6, 0.3])
EPS = 1_000_000
RECORD_WORDS = 9  # one 36-byte flash log record
RESERVE = int(re.search(r"#define EDP_FLOG_RESERVE (\d+)u",
                        (ROOT / "firmware/core/include/edgedp/options.h").read_text()).group(1))
SLOT, SECTOR = 36, 1008  # the posix port's flash log: 28 slots per sector
RATE_TAG = 0x52415445    # src/flog.h: XORed into a rate record's check word


@pytest.fixture
def dev_files(native_builds: None, tmp_path: Path) -> Iterator[PosixDevice]:
    h = PosixDevice(tmp_path / "store.bin", {"EDP_FLASH_FILE": str(tmp_path / "flash.bin")})
    yield h
    assert h.stop() in (None, 0)


def lose_store(h: PosixDevice) -> None:
    h.stop()
    h.store.unlink()


def send_and_get(dev, wire: bytes) -> frames.Frame:
    dev.send_raw(wire)
    return dev.receive()


def test_store_loss_keeps_spend_and_counter_from_flash(dev_files: PosixDevice, test_key: bytes) -> None:
    dev = dev_files.start()
    dev.configure(test_key, MechConfig(), Caps(daily=100 * MICRO))
    for _ in range(40):  # more records than one 28-slot sector: the log switches sectors
        dev.query(X, "label")
    before = dev.budget()
    assert before.lifetime_spent == 40 * EPS
    lose_store(dev_files)
    dev = dev_files.start()
    after = dev.budget()
    assert dev.info().store == "fresh"
    assert after.lifetime_spent >= before.lifetime_spent, "store loss gave back lifetime budget"
    assert after.daily_spent >= before.daily_spent, "store loss gave back today's budget"
    assert after.auth_counter >= before.auth_counter
    # over-count by at most the reservation (edgedp/options.h, EDP_FLOG_RESERVE)
    assert after.lifetime_spent <= before.lifetime_spent + (RESERVE - 1) * EPS
    dev.query(X, "label")
    assert dev.budget().lifetime_spent == after.lifetime_spent + EPS


def flash_records(path: Path) -> int:
    raw = path.read_bytes()
    return sum(1 for s in range(2) for i in range(SECTOR // SLOT)
               if raw[s * SECTOR + i * SLOT: s * SECTOR + (i + 1) * SLOT] != b"\xff" * SLOT)


def test_flash_is_written_once_per_reservation(dev_files: PosixDevice, test_key: bytes) -> None:
    """A record covers RESERVE answers; after a store loss the device comes back with the
    reserved spend (more than it answered, never less), clamped to the day's cap."""
    dev = dev_files.start()
    n = 3 * RESERVE - 2
    for _ in range(n):
        dev.query(X)
    assert flash_records(dev_files.store.parent / "flash.bin") == 3   # answers 1, R + 1, 2R + 1
    assert dev.budget().lifetime_spent == n * EPS
    dev_files.stop()
    dev = dev_files.start()                      # the store loaded: no reservation counted
    assert dev.budget().lifetime_spent == n * EPS
    lose_store(dev_files)
    dev = dev_files.start()
    assert dev.budget().lifetime_spent == 3 * RESERVE * EPS   # the reserved spend
    # the reservation stops at the cap: a day's spend never comes back above it
    lose_store(dev_files)
    (dev_files.store.parent / "flash.bin").unlink()
    dev = dev_files.start()
    dev.configure(test_key, MechConfig(), Caps(daily=5 * EPS))
    dev.query(X)
    lose_store(dev_files)
    b = dev_files.start().budget()
    assert b.daily_spent == 5 * EPS and b.lifetime_spent == RESERVE * EPS


def test_without_the_flash_log_store_loss_restarts_from_zero(dev_files: PosixDevice, test_key: bytes) -> None:
    """The control: losing the flash file too is what main did on every store loss."""
    dev = dev_files.start()
    dev.query(X, "label")
    lose_store(dev_files)
    (dev_files.store.parent / "flash.bin").unlink()
    assert dev_files.start().budget().lifetime_spent == 0


@pytest.mark.parametrize("lose_flash", [False, True], ids=["flash-kept", "flash-lost-too"])
def test_captured_config_is_refused_after_store_loss(dev_files: PosixDevice, test_key: bytes,
                                                     lose_flash: bool) -> None:
    dev = dev_files.start()
    seq, wire = dev.admin_frame(P.CONFIG, P.config_payload(MechConfig(), Caps(daily=100 * MICRO)), test_key)
    f = send_and_get(dev, wire)  # the genuine command, captured on the wire
    assert f.type == P.CONFIG | P.RESPONSE
    assert send_and_get(dev, wire).body[0] == 9  # ERR_AUTH: its nonce is used up
    lose_store(dev_files)
    if lose_flash:
        (dev_files.store.parent / "flash.bin").unlink()
    dev = dev_files.start()
    before = dev.budget()
    f = send_and_get(dev, wire)
    assert f.type == P.CONFIG | P.RESPONSE and P.AdminAnswer.parse(f.body).result in (9, 10), \
        "a captured CONFIG was accepted after store loss"
    assert dev.budget() == before


def _answer(dev, type_: int, body: bytes, seq: int) -> P.AdminAnswer:
    f = send_and_get(dev, frames.encode(type_, seq, body))
    assert f.type == type_ | P.RESPONSE, f
    return P.AdminAnswer.parse(f.body)


def test_nonce_is_fresh_per_challenge_and_one_use(dev_files: PosixDevice, test_key: bytes) -> None:
    dev = dev_files.start()
    a = dev.challenge(test_key)
    b = dev.challenge(test_key)
    assert b.nonce != a.nonce and b.counter == a.counter  # every CHALLENGE draws a new nonce
    # A frame signed for the older nonce is dead, and its refusal changes nothing.
    old = P.admin_body(P.RESET_BUDGET, a.nonce, a.counter + 1, b"", test_key)
    ans = _answer(dev, P.RESET_BUDGET, old, 5)
    assert ans.result == 9 and ans.authentic(test_key, P.RESET_BUDGET, b.nonce, old[-32:])
    # Frames without a valid tag (wrong key, none at all, empty) leave the nonce as it was:
    # the frame signed for it still lands afterwards.
    good = P.admin_body(P.RESET_BUDGET, b.nonce, b.counter + 1, b"", test_key)
    for bad in (P.admin_body(P.RESET_BUDGET, b.nonce, b.counter + 1, b"", bytes(32)), b"\x01" * 8, b""):
        assert _answer(dev, P.RESET_BUDGET, bad, 6).result == 9
    assert dev.budget().auth_counter == a.counter
    ans = _answer(dev, P.RESET_BUDGET, good, 7)
    assert (ans.result, ans.counter) == (0, b.counter + 1)
    assert ans.authentic(test_key, P.RESET_BUDGET, b.nonce, good[-32:])
    # A valid tag uses the nonce up, also when the command is refused (here: replayed counter).
    c = dev.challenge(test_key)
    replay = P.admin_body(P.RESET_BUDGET, c.nonce, 1, b"", test_key)
    assert _answer(dev, P.RESET_BUDGET, replay, 8).result == 10
    again = P.admin_body(P.RESET_BUDGET, c.nonce, c.counter + 1, b"", test_key)
    assert _answer(dev, P.RESET_BUDGET, again, 9).result == 9
    # The counter is still checked: a fresh nonce with an old counter is a replay.
    with pytest.raises(DeviceError, match="ERR_REPLAY"):
        dev.admin(P.RESET_BUDGET, b"", test_key, counter=1)
    # Nonces differ across restarts of the same device (fresh key material per boot).
    first = dev.challenge(test_key).nonce
    assert dev_files.start().challenge(test_key).nonce != first


def test_forged_challenge_counter_is_detected(dev_files: PosixDevice, test_key: bytes) -> None:
    """A man in the middle rewriting the counter of the CHALLENGE answer breaks its tag."""
    dev = dev_files.start()
    ch = dev.challenge(test_key)
    forged = P.Challenge(ch.nonce, 2**64 - 2, ch.tag)
    assert ch.authentic(test_key) and not forged.authentic(test_key)
    assert not ch.authentic(bytes(32))
    with pytest.raises(DeviceError, match="ERR_AUTH"):
        dev.configure(bytes(32), MechConfig(), Caps(daily=10 * MICRO))  # a key the device does not hold


@pytest.mark.parametrize("cut", range(RECORD_WORDS + 2))
def test_power_cut_at_every_flash_write_of_a_reservation(dev_files: PosixDevice, cut: int) -> None:
    dev = dev_files.start()
    for _ in range(RESERVE):  # the first record covers these; the next answer writes one
        dev.query(X)
    before = dev.budget().lifetime_spent
    dev = dev_files.start(EDP_FLASH_CUT_AFTER=str(cut))
    answered = True
    try:
        dev.query(X)
    except TransportError:
        answered = False
    code = dev_files.stop()
    assert answered == (cut >= RECORD_WORDS) and code in (0, 99), f"cut={cut} exit={code}"
    # Whatever the cut, a store loss afterwards never lowers the spend below what was
    # recorded, nor below an answer that was sent.
    dev_files.store.unlink()
    dev = dev_files.start()
    after = dev.budget().lifetime_spent
    assert after >= before + (EPS if answered else 0)
    assert after <= before + RESERVE * EPS
    dev.query(X)
    assert dev.budget().lifetime_spent == after + EPS


def test_failed_reseed_is_retried_at_the_next_query(dev_files: PosixDevice) -> None:
    """EDP_POSIX_ENTROPY=fail:2: the boot seed and the first retry fail, the second retry works."""
    dev = dev_files.start(EDP_POSIX_ENTROPY="fail:2")
    assert dev.info().entropy == "failed"
    with pytest.raises(DeviceError, match="ERR_ENTROPY"):
        dev.query(X)
    assert dev.budget().lifetime_spent == 0
    r = dev.query(X, "label")
    assert r.label in (0, 1, 2)
    assert dev.info().entropy == "ok"
    assert dev.budget().lifetime_spent == EPS


def set_rate(dev, key: bytes, rate: P.Rate) -> None:
    admin.run(dev, key, P.RATE, lambda b: rate.pack(), lambda b, a: None)


def reprovision(dev, key: bytes, now: int = TEST_EPOCH) -> None:
    """What a blank store needs on a production board before any external output."""
    dev.configure(key, MechConfig(), Caps(daily=100 * MICRO))
    dev.set_time(key, now)


def assert_empty_bucket(dev, key: bytes, rate: P.Rate) -> None:
    """The limit is `rate` and its bucket is empty: the first query is refused with the wait for
    one token, nothing is charged; that wait later exactly the answers it refilled pass."""
    assert dev.info().rate == rate and dev.state(key).rate == rate
    spent = dev.budget().lifetime_spent
    wait = -(-60 // rate.per_minute)
    with pytest.raises(DeviceError, match=f"ERR_RATE.*retry in {wait} s"):
        dev.query(X, "label")
    assert dev.budget().lifetime_spent == spent
    dev.set_time(key, TEST_EPOCH + wait)
    for _ in range(min(rate.burst, wait * rate.per_minute // 60)):
        dev.query(X, "label")
    with pytest.raises(DeviceError, match="ERR_RATE"):
        dev.query(X, "label")


def test_rate_limit_survives_store_loss(dev_files: PosixDevice, test_key: bytes) -> None:
    """The rate limit comes back from the flash log after a lost store, with an empty bucket (no
    burst right after a loss); a later RATE that loosens the limit, and one that lifts it, are the
    ones restored after the next loss (the limit of the highest counter, not the strictest)."""
    dev = dev_files.start()
    strict = P.Rate(3, 30, 0)
    set_rate(dev, test_key, strict)
    dev.query(X, "label")          # two tokens left in the bucket the store held
    lose_store(dev_files)
    dev = dev_files.start()
    assert dev.info().store == "fresh"
    reprovision(dev, test_key)
    assert_empty_bucket(dev, test_key, strict)
    loose = P.Rate(50, 120, 0)
    set_rate(dev, test_key, loose)
    lose_store(dev_files)
    dev = dev_files.start()
    reprovision(dev, test_key)
    assert_empty_bucket(dev, test_key, loose)
    set_rate(dev, test_key, P.Rate())
    lose_store(dev_files)
    dev = dev_files.start()
    reprovision(dev, test_key)
    assert dev.info().rate == P.Rate()
    for _ in range(5):
        dev.query(X, "label")


@pytest.mark.parametrize("fail", [{"EDP_STORE_FAIL_AFTER": "0"},
                                  {"EDP_FLASH_FAIL_AFTER": str(RECORD_WORDS - 1)}],
                         ids=["store-commit", "flash-check-word"])
def test_a_refused_rate_is_not_restored_after_a_store_loss(dev_files: PosixDevice, test_key: bytes,
                                                           fail: dict[str, str]) -> None:
    """A RATE whose flash record is written but whose store commit fails (EDP_STORE_FAIL_AFTER=0:
    the first store write after boot fails), or whose flash record lands but its check word's
    program reports an error, is refused and the device keeps its limit; the next admin command
    commits that same counter; a store loss then restores the limit the device ran, not the
    refused one."""
    dev = dev_files.start()
    kept = P.Rate(3, 30, 0)
    set_rate(dev, test_key, kept)
    dev_files.stop()
    dev = dev_files.start(**fail)
    with pytest.raises(DeviceError, match="ERR_STORE") as e:
        dev.admin(P.RATE, P.Rate(50, 120, 0).pack(), test_key)
    assert e.value.authenticated
    assert dev.info().rate == kept
    refused_counter = dev.state(test_key).budget.auth_counter + 1
    assert dev.set_time(test_key, TEST_EPOCH) == refused_counter  # commits the refused RATE's counter
    lose_store(dev_files)
    dev = dev_files.start()
    assert dev.info().store == "fresh"
    assert dev.info().rate == kept, "the store loss restored the limit of a RATE the device refused"


def old_mark_record(seq: int, day: int, daily: int, lifetime: int, counter: int) -> bytes:
    """A flash log record as firmware before rate records wrote it (seq | day | daily | lifetime |
    counter | CRC-32 of the 32 bytes before it)."""
    body = struct.pack("<IIQQQ", seq, day, daily, lifetime, counter)
    return body + struct.pack("<I", zlib.crc32(body))


def rate_records(raw: bytes) -> list[tuple[int, int, int, int, int]]:
    """(seq, burst, per_minute, tarpit_ms, counter) of every rate record in the flash file."""
    out = []
    for s in range(2):
        for i in range(SECTOR // SLOT):
            rec = raw[s * SECTOR + i * SLOT: s * SECTOR + (i + 1) * SLOT]
            check, = struct.unpack_from("<I", rec, 32)
            if check ^ zlib.crc32(rec[:32]) == RATE_TAG:
                seq, burst, per_minute, tarpit, z1, z2, counter = struct.unpack_from("<IIIIIIQ", rec)
                assert (z1, z2) == (0, 0)
                out.append((seq, burst, per_minute, tarpit, counter))
    return out


def test_a_flash_log_of_the_old_layout_is_read_and_takes_the_rate_limit(dev_files: PosixDevice,
                                                                       test_key: bytes) -> None:
    """A board updated from firmware that kept no rate limit in flash: its log (one full sector and
    a record in the other, packed here in the old layout) still gives back the spend and the counter
    after a store loss, a limit its store holds but its log does not (set by the old firmware) is
    written to the log at boot, and it is restored after the next loss."""
    day = TEST_EPOCH // 86400
    raw = bytearray(b"\xff" * (2 * SECTOR))
    for i in range(SECTOR // SLOT + 1):
        off = (i // (SECTOR // SLOT)) * SECTOR + (i % (SECTOR // SLOT)) * SLOT
        raw[off: off + SLOT] = old_mark_record(i + 1, day, (i + 1) * EPS, (i + 101) * EPS, i // 4 + 1)
    flash = dev_files.store.parent / "flash.bin"
    flash.write_bytes(bytes(raw))
    dev = dev_files.start()
    b = dev.budget()
    assert dev.info().store == "fresh"
    n = SECTOR // SLOT + 1
    assert (b.lifetime_spent, b.daily_spent, b.auth_counter) == ((n + 100) * EPS, n * EPS, (n - 1) // 4 + 1)
    limit = P.Rate(4, 6, 250)
    set_rate(dev, test_key, limit)
    counter = dev.budget().auth_counter
    # the record is the rate kind of flog.h, with the counter of the RATE that set it
    assert rate_records(flash.read_bytes()) == [(n + 1, 4, 6, 250, counter)]
    # as the old firmware left it: the limit in the store only (the slot reads erased again)
    dev_files.stop()
    raw = bytearray(flash.read_bytes())
    raw[SECTOR + SLOT: SECTOR + 2 * SLOT] = b"\xff" * SLOT
    flash.write_bytes(bytes(raw))
    dev = dev_files.start()
    assert dev.info().store == "loaded" and dev.info().rate == limit
    assert rate_records(flash.read_bytes()) == [(n + 1, 4, 6, 250, counter)]  # written back at boot
    lose_store(dev_files)
    dev = dev_files.start()
    b = dev.budget()
    assert b.lifetime_spent >= (n + 100) * EPS and b.auth_counter == counter
    reprovision(dev, test_key)
    assert_empty_bucket(dev, test_key, limit)


def test_rate_limit_survives_store_loss_through_the_cli(native_builds: None, monkeypatch, tmp_path: Path) -> None:
    """The operator's path: `admin rate`, the store lost, `admin config` and `admin set-time` to
    re-provision; `info` shows the limit again and `query` is refused with ERR_RATE and the wait
    of an empty bucket (one answer every 10 s)."""
    def run(*args: str, stdin: str | None = None):
        return CliRunner().invoke(main, [*args, "--target", "posix"], input=stdin)

    key = str(ROOT / "tests/keys/test-device.key")
    store = tmp_path / "store.bin"
    monkeypatch.setenv("EDP_STORE_FILE", str(store))
    monkeypatch.setenv("EDP_FLASH_FILE", str(tmp_path / "flash.bin"))
    monkeypatch.setenv("EDP_POSIX_TIME", str(TEST_EPOCH))
    r = run("admin", "rate", "--key-file", key, "--burst", "3", "--per-minute", "6")
    assert r.exit_code == 0, r.output
    store.unlink()
    for args in (["admin", "config", "--key-file", key, "--daily-cap", "100"],
                 ["admin", "set-time", "--key-file", key, "--unix", str(TEST_EPOCH)]):
        r = run(*args)
        assert r.exit_code == 0, r.output
    info = json.loads(run("info", "--json").output)
    assert (info["store"], info["rate_burst"], info["rate_per_minute"]) == ("loaded", 3, 6)
    rec = json.loads(run("query", "--json", "-", stdin="0.2,0.8\n").stdout.splitlines()[0])
    assert rec["status"] == "ERR_RATE" and rec["retry_after_s"] == 10
