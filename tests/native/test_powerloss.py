"""Power-loss injection on the posix port's store, in the manner of littlefs's emulated block device.

Each 4-byte store write is one step; EDP_STORE_CUT_AFTER=n cuts power (the process
exits 99) before write n+1. For every n of a budget commit we reboot on the same
store and check that it loads and that the recorded spend never decreases — and
that an answer that reached the host is always paid for. The flash log's reservations
(one record per EDP_FLOG_RESERVE answers) get the same treatment: EDP_FLASH_CUT_AFTER=n
cuts at every flash operation of a run that crosses two reservations, with the store kept
or lost afterwards, and the spend never falls below the answers received."""
from __future__ import annotations

import re

import numpy as np
import pytest

from edgedp import schema as S
from edgedp.device import admin, frames, protocol as P
from edgedp.device.errors import DeviceError, ErrorCode, StateUnknown, TransportError
from edgedp.device.protocol import Caps, MechConfig

from ..conftest import PosixDevice
from ..helpers import ROOT

pytestmark = pytest.mark.native
EPS = 1_000_000  # micro-epsilon per query
X = np.array([0.1, 0.6, 0.3])
WORDS_PER_COMMIT = 28  # 112-byte record (store version 2) = 27 body words + 1 CRC word
AUDIT_WORDS = S.AUDIT_ENTRY_SIZE // 4  # the audit entry an admin frame writes after its answer left
RESERVE = int(re.search(r"#define EDP_FLOG_RESERVE (\d+)u",
                        (ROOT / "firmware/core/include/edgedp/options.h").read_text()).group(1))
FLASH_WORDS = 9         # one 36-byte flash log record


def spent(dev) -> tuple[int, int]:
    b = dev.budget()
    return b.lifetime_spent, b.daily_spent


@pytest.mark.parametrize("cut", range(WORDS_PER_COMMIT + 2))
def test_cut_power_at_every_write_of_a_commit(posix_device, cut: int) -> None:
    dev = posix_device.start()
    for _ in range(3):
        dev.query(X)
    before, _ = spent(dev)
    assert before == 3 * EPS

    dev = posix_device.start(EDP_STORE_CUT_AFTER=str(cut))
    answered = False
    try:
        dev.query(X)
        answered = True
    except TransportError:
        pass
    code = posix_device.stop()
    assert answered == (cut >= WORDS_PER_COMMIT), f"cut={cut} exit={code}"
    assert code in (0, 99)

    dev = posix_device.start()
    info = dev.info()
    after, _ = spent(dev)
    assert info.store in ("loaded", "recovered")
    assert after >= before, "a power cut lost recorded spend"
    if answered:
        assert after >= before + EPS, "an answer was released without its spend being durable"
    assert after <= before + 2 * EPS  # at most the torn commit counted conservatively
    # The device keeps working and keeps counting.
    r = dev.query(X)
    assert spent(dev)[0] == after + EPS
    assert r.remaining_micro == dev.budget().remaining


@pytest.mark.parametrize("cut", range(WORDS_PER_COMMIT + AUDIT_WORDS + 2))
def test_cut_power_at_every_write_of_a_signed_config(posix_device, test_key: bytes, cut: int) -> None:
    """A CONFIG signed from the authenticated state, power cut at each write of its commit: the host
    reports state unknown (no authentic answer, no re-read), and after the reboot the device holds
    either the whole old record or the whole new one, and the captured frame never lands again.
    A cut in the audit entry written after the answer (the host's re-read finds the device gone:
    state unknown) leaves the new record, and the log skips the torn entry."""
    dev = posix_device.start()
    before = dev.state(test_key).budget
    logged = dev.audit_log(test_key).total
    dev = posix_device.start(EDP_STORE_CUT_AFTER=str(cut))
    signed: list[bytes] = []
    write = dev.link.write

    def capture(data: bytes) -> None:
        if data.strip(b"\x00") and frames.decode(data.rstrip(b"\x00")).type == P.CONFIG:
            signed.append(data)
        write(data)
    dev.link.write = capture  # type: ignore[method-assign]
    dev.timeout = 2.0
    try:
        admin.run(dev, test_key, P.CONFIG, lambda b: P.config_payload(MechConfig(), Caps(7 * EPS)),
                  lambda b, a: None if a.daily_cap == 7 * EPS else "cap")
        accepted = True
    except StateUnknown:
        accepted = False
    assert posix_device.stop() in (0, 99)
    assert accepted == (cut >= WORDS_PER_COMMIT + AUDIT_WORDS), cut
    dev = posix_device.start()
    after = dev.state(test_key).budget
    log = dev.audit_log(test_key)
    config_logged = any(e.event == S.AuditEvent.CONFIG for e in log.entries)
    assert config_logged == (cut >= WORDS_PER_COMMIT + AUDIT_WORDS), cut
    assert [e.seq for e in log.entries] == list(range(1, log.total + 1)) and log.total >= logged  # no torn entry
    old = (before.daily_cap, before.auth_counter)
    new = (7 * EPS, before.auth_counter + 1)
    assert (after.daily_cap, after.auth_counter) in (old, new), "a torn admin commit"
    if cut >= WORDS_PER_COMMIT:
        assert (after.daily_cap, after.auth_counter) == new
    dev.send_raw(signed[0])  # the captured frame after the reboot: its nonce died with the power
    assert P.AdminAnswer.parse(dev.receive().body).result == ErrorCode.ERR_AUTH
    assert dev.state(test_key).budget.daily_cap == after.daily_cap


@pytest.mark.parametrize("slot", [0, 1])
def test_bit_flips_in_either_slot(posix_device, slot: int) -> None:
    dev = posix_device.start()
    for _ in range(5):
        dev.query(X)
    before, _ = spent(dev)
    posix_device.stop()
    rng = np.random.default_rng(slot)
    raw = bytearray(posix_device.store.read_bytes())
    for _ in range(3):
        pos = slot * 128 + int(rng.integers(0, 112))
        raw[pos] ^= 1 << int(rng.integers(0, 8))
    posix_device.store.write_bytes(bytes(raw))
    dev = posix_device.start()
    info = dev.info()
    after, _ = spent(dev)
    # Either damaged copy is detected (CRC), reported, and the spend comes back from the other copy
    # and the flash high-water log: never below what was spent, whichever slot held the newest record.
    assert info.store == "recovered"
    assert after >= before, "a damaged slot rolled the spend back"


def test_both_slots_destroyed_fails_closed(posix_device) -> None:
    dev = posix_device.start()
    dev.query(X)
    posix_device.stop()
    raw = bytearray(posix_device.store.read_bytes())
    for s in (0, 128):
        raw[s + 20] ^= 0xFF
    posix_device.store.write_bytes(bytes(raw))
    dev = posix_device.start()
    assert dev.info().store == "corrupt"
    with pytest.raises(DeviceError) as e:
        dev.query(X)
    assert e.value.code == "ERR_STORE"
    assert dev.local(X).label == 1  # the local path does not depend on the store
    assert dev.ping(b"x") == b"x"


def test_no_flash_cut_lowers_the_spend_below_the_answers_received(native_builds: None, tmp_path) -> None:
    """R + 2 queries write two reservation records (answers 1 and R + 1): cut power before the
    first and at each of the second one's 9 word programs and after it, then reboot with the
    store kept and again with it lost."""
    n = RESERVE + 2
    for cut in (0, *range(FLASH_WORDS, 2 * FLASH_WORDS + 1)):
        h = PosixDevice(tmp_path / f"store-{cut}.bin", {"EDP_FLASH_FILE": str(tmp_path / f"flash-{cut}.bin")})
        dev = h.start(EDP_FLASH_CUT_AFTER=str(cut))
        received = 0
        try:
            for _ in range(n):
                dev.query(X)
                received += 1
        except TransportError:
            pass
        code = h.stop()
        assert code == (0 if received == n else 99), (cut, received, code)
        assert received == min(n, RESERVE * (cut // FLASH_WORDS)), (cut, received)
        for lost in (False, True):
            if lost:
                h.store.unlink()
            spent = h.start().budget().lifetime_spent
            assert h.stop() == 0
            assert spent >= received * EPS, f"cut {cut}, store lost {lost}: {spent} < {received} answers"
            assert spent <= (received + (RESERVE if lost else 0)) * EPS, (cut, lost, spent, received)


OLD_RATE, NEW_RATE = P.Rate(2, 30, 0), P.Rate(9, 120, 50)


@pytest.mark.parametrize("cut", [f"flash:{n}" for n in range(FLASH_WORDS + 1)] + ["store:0", "store:5"])
def test_power_cut_in_a_rate_leaves_the_old_or_the_new_limit(native_builds: None, tmp_path, test_key: bytes,
                                                             cut: str) -> None:
    """A RATE that loosens the limit, power cut at each of the 9 word programs of its flash record
    (flash:9 cuts nothing), before its store commit (store:0: the flash record is written, the
    commit is not) or inside it (store:5: a torn slot, the store loads "recovered"): rebooted on the kept store and then again with the store lost, the limit is the
    old or the new one, the new one whenever the answer came, and the loss restores the limit the
    device ran before it (with an empty bucket: the first query is refused)."""
    kind, n = cut.split(":")
    h = PosixDevice(tmp_path / "store.bin", {"EDP_FLASH_FILE": str(tmp_path / "flash.bin")})
    dev = h.start()
    admin.run(dev, test_key, P.RATE, lambda b: OLD_RATE.pack(), lambda b, a: None)
    dev = h.start(**{"EDP_FLASH_CUT_AFTER" if kind == "flash" else "EDP_STORE_CUT_AFTER": n})
    dev.timeout = 2.0
    try:
        dev.admin(P.RATE, NEW_RATE.pack(), test_key)
        answered = True
    except StateUnknown:
        answered = False
    code = h.stop()
    assert answered == (cut == f"flash:{FLASH_WORDS}") and code == (0 if answered else 99), (cut, code)
    dev = h.start()
    kept = dev.info().rate
    assert kept in (OLD_RATE, NEW_RATE) and (kept == NEW_RATE or not answered), (cut, kept)
    if cut == "store:5":  # the torn slot may have held the RATE's commit: the newer signed limit
        assert dev.info().store == "recovered" and kept == NEW_RATE
    assert h.stop() == 0
    h.store.unlink()
    dev = h.start()
    assert dev.info().rate == kept, f"{cut}: the store loss restored {dev.info().rate}, the device ran {kept}"
    with pytest.raises(DeviceError, match="ERR_RATE"):
        dev.query(X)
    assert h.stop() == 0
