"""The fleet registry: devices, their provisioning records, authenticated state snapshots, audit
log entries and DP-SGD runs, in a SQL database through SQLAlchemy.

Where: the SQLAlchemy URL in ``$EDGEDP_REGISTRY`` (``postgresql+psycopg://user@host/db`` for a
team sharing one), else the SQLite file ``registry.sqlite`` in the user data directory as
platformdirs names it. The schema is Alembic's: :func:`open_registry` upgrades a database to the
newest revision the package ships (``edgedp/fleet/migrations``), so data kept across versions
migrates; the tables are below (docs/fleet.md, "Registry").

Writes take what only an authenticated read produces: :func:`add_snapshot` a
:class:`~edgedp.device.protocol.State` and :func:`add_audit` an
:class:`~edgedp.device.protocol.AuditLog`, objects that exist only once their tag verified with
the device key, so an unauthenticated BUDGET can never be stored as authenticated. A sync whose
answer did not authenticate is recorded in ``syncs`` with its outcome and no numbers. Reading for
``fleet status`` and the dashboard is ``edgedp.fleet.status``."""
from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import platformdirs
from sqlalchemy import (BigInteger, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint,
                        create_engine, func, select)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from ..trust import config_file_problem

from ..device.protocol import AuditLog, State

REGISTRY_ENV = "EDGEDP_REGISTRY"
SYNC_OUTCOMES = ("ok", "not-authentic", "unreachable", "refused", "no-key")
"""A sync's outcome per device; the failures in the order of precedence of ``fleet sync``'s exit
code (docs/fleet.md, "fleet sync")."""


def default_url() -> str:
    """$EDGEDP_REGISTRY, else sqlite:///<user data dir>/edgedp/registry.sqlite."""
    env = os.environ.get(REGISTRY_ENV)
    if env:
        return env
    return f"sqlite:///{platformdirs.user_data_path('edgedp') / 'registry.sqlite'}"


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    pass


class Device(Base):
    """A device the fleet knows: its id, board, and how to reach it."""

    __tablename__ = "devices"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    board: Mapped[str | None] = mapped_column(String(32))
    target: Mapped[str | None] = mapped_column(Text)
    emulated: Mapped[bool] = mapped_column(Boolean, default=False)
    added_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=now)
    provisionings: Mapped[list["Provisioning"]] = relationship(back_populates="device", order_by="Provisioning.id")


class Provisioning(Base):
    """One provisioning of a device: the image built for it and a fingerprint of its key (never the key)."""

    __tablename__ = "provisioning_records"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=now)
    board: Mapped[str] = mapped_column(String(32))
    model_name: Mapped[str | None] = mapped_column(Text)
    model_sha256: Mapped[str | None] = mapped_column(String(64))
    image: Mapped[str] = mapped_column(Text)
    image_sha256: Mapped[str] = mapped_column(String(64))
    key_fingerprint: Mapped[str] = mapped_column(String(64))
    tool_version: Mapped[str] = mapped_column(String(32))
    device: Mapped[Device] = relationship(back_populates="provisionings")


class Snapshot(Base):
    """The device's STATE at one sync, as authenticated (amounts in micro-ε, exact)."""

    __tablename__ = "state_snapshots"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id"), index=True)
    taken_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=now)
    day: Mapped[int | None] = mapped_column(Integer)
    recorded_day: Mapped[int] = mapped_column(Integer)
    daily_cap: Mapped[int] = mapped_column(BigInteger)
    daily_spent: Mapped[int] = mapped_column(BigInteger)
    lifetime_cap: Mapped[int] = mapped_column(BigInteger)
    lifetime_spent: Mapped[int] = mapped_column(BigInteger)
    epsilon_per_query: Mapped[int] = mapped_column(BigInteger)
    auth_counter: Mapped[int] = mapped_column(BigInteger)
    store: Mapped[str] = mapped_column(String(32))
    store_ok: Mapped[bool] = mapped_column(Boolean)
    rate_burst: Mapped[int] = mapped_column(Integer)
    rate_per_minute: Mapped[int] = mapped_column(Integer)
    rate_tarpit_ms: Mapped[int] = mapped_column(Integer)
    audit_total: Mapped[int | None] = mapped_column(BigInteger)
    audit_lost: Mapped[int | None] = mapped_column(BigInteger)
    """Audit events logged since the previous sync that this sync could not read (overwritten by
    the ring or torn), None when the audit log was not read."""


class AuditEntry(Base):
    """One audit log entry, once per (device, seq) however many syncs read it."""

    __tablename__ = "audit_entries"
    __table_args__ = (UniqueConstraint("device_id", "seq"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id"), index=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    day: Mapped[int | None] = mapped_column(Integer)
    counter: Mapped[int] = mapped_column(BigInteger)
    event: Mapped[str] = mapped_column(String(32))
    arg: Mapped[int] = mapped_column(Integer)
    detail: Mapped[str] = mapped_column(Text)
    first_seen: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=now)


class Sync(Base):
    """One sync of one device: its outcome (SYNC_OUTCOMES) and, if not ok, why."""

    __tablename__ = "syncs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("devices.id"), index=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=now)
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str | None] = mapped_column(Text)
    snapshot_id: Mapped[int | None] = mapped_column(ForeignKey("state_snapshots.id"))


class TrainingRun(Base):
    """A DP-SGD run: its final (ε, δ) under the neighbouring relation it was accounted for."""

    __tablename__ = "dpsgd_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Text)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=now)
    epsilon: Mapped[float | None] = mapped_column(Float)
    """None for a run that is not private (a seeded run: "not private" wherever ε would appear)."""
    delta: Mapped[float] = mapped_column(Float)
    relation: Mapped[str] = mapped_column(String(32))
    manifest: Mapped[str | None] = mapped_column(Text)
    epochs: Mapped[list["TrainingEpoch"]] = relationship(back_populates="run", order_by="TrainingEpoch.epoch")


class TrainingEpoch(Base):
    """ε spent by a DP-SGD run through the end of one epoch."""

    __tablename__ = "dpsgd_epochs"
    __table_args__ = (UniqueConstraint("run_id", "epoch"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("dpsgd_runs.id"), index=True)
    epoch: Mapped[int] = mapped_column(Integer)
    epsilon: Mapped[float | None] = mapped_column(Float)
    run: Mapped[TrainingRun] = relationship(back_populates="epochs")


MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _alembic_config(url: str):  # -> alembic.config.Config (imported here: only opening a registry needs it)
    from alembic.config import Config
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest revision shipped in edgedp/fleet/migrations."""
    from alembic import command
    cfg = _alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def head_revision() -> str:
    """The newest revision the package ships."""
    from alembic.script import ScriptDirectory
    head = ScriptDirectory.from_config(_alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None: not a registry yet)."""
    from alembic.runtime.migration import MigrationContext
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


class Registry:
    """An open registry: ``session()`` for reads and writes (each a transaction)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.url = engine.url.render_as_string(hide_password=True)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            yield s

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()


def open_registry(url: str | None = None, migrate: bool = True) -> Registry:
    """The registry at url (default: default_url()), its schema upgraded to the package's newest
    revision (``migrate``). A SQLite file's folder is created 0700 (the registry names every
    device and its key fingerprint); an existing SQLite file another user owns or could have
    written (the rule of edgedp.trust.config_file_problem) is refused: its "authenticated"
    snapshots would be theirs. ValueError for a URL SQLAlchemy cannot use or a file refused."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    url = url or default_url()
    try:
        engine = create_engine(url)
    except (ArgumentError, NoSuchModuleError, ModuleNotFoundError) as exc:
        raise ValueError(f"registry URL {engine_hint(url)}: {exc}") from None
    if engine.url.get_backend_name() == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        folder = Path(str(engine.url.database)).expanduser().parent
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
        database = Path(str(engine.url.database)).expanduser()
        if database.exists() and (problem := config_file_problem(database)):
            raise ValueError(f"registry {database} refused: {problem}")
    if migrate:
        upgrade(engine)
    return Registry(engine)


def engine_hint(url: str) -> str:
    """url without its password, for messages."""
    try:
        from sqlalchemy.engine import make_url
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL: show its scheme only
        return url.split(":", 1)[0] + ":…"


# ---- writes --------------------------------------------------------------------------------

class RegistryError(ValueError):
    """A registry write that does not fit what it holds (unknown device, duplicate id)."""


def add_device(s: Session, device_id: str, target: str | None, board: str | None = None,
               emulated: bool = False) -> Device:
    """A new device, or the known one with its target (and board, if given) updated."""
    d = s.get(Device, device_id)
    if d is None:
        d = Device(id=device_id, target=target, board=board, emulated=emulated)
        s.add(d)
    else:
        d.target = target
        if board is not None:
            d.board, d.emulated = board, emulated
    s.flush()
    return d


def get_device(s: Session, device_id: str) -> Device:
    d = s.get(Device, device_id)
    if d is None:
        raise RegistryError(f"device {device_id} is not in the registry (edgedp fleet add {device_id} --target T)")
    return d


def devices(s: Session) -> Sequence[Device]:
    return s.scalars(select(Device).order_by(Device.id)).all()


def add_provisioning(s: Session, device_id: str, board: str, model_name: str | None, model_sha256: str | None,
                     image: str, image_sha256: str, key_fingerprint: str, tool_version: str) -> Provisioning:
    """Record a provisioning (and the device, emulated when board is qemu, if new)."""
    d = s.get(Device, device_id)
    if d is None:
        d = Device(id=device_id, board=board, emulated=board == "qemu", target=None)
        s.add(d)
    else:
        d.board, d.emulated = board, board == "qemu"
    p = Provisioning(device_id=device_id, board=board, model_name=model_name, model_sha256=model_sha256,
                     image=image, image_sha256=image_sha256, key_fingerprint=key_fingerprint,
                     tool_version=tool_version)
    s.add(p)
    s.flush()
    return p


def latest_provisioning(s: Session, device_id: str) -> Provisioning | None:
    return s.scalars(select(Provisioning).where(Provisioning.device_id == device_id)
                     .order_by(Provisioning.id.desc()).limit(1)).first()


def add_audit(s: Session, device_id: str, log: AuditLog) -> tuple[int, int]:
    """Store the entries of an authenticated audit log not stored yet (by the device's seq);
    returns (entries new to the registry, events logged since the last stored entry that the log
    no longer holds: overwritten or torn)."""
    known = set(s.scalars(select(AuditEntry.seq).where(AuditEntry.device_id == device_id)).all())
    last = s.scalar(select(func.max(AuditEntry.seq)).where(AuditEntry.device_id == device_id)) or 0
    new = [e for e in log.entries if e.seq not in known]
    for e in new:
        s.add(AuditEntry(device_id=device_id, seq=e.seq, day=e.day, counter=e.counter, event=e.event_name,
                         arg=e.arg, detail=e.detail))
    # Entry seqs are 1, 2, ... (store.h); total is the highest seq ever logged. Those above the
    # last one stored and below the oldest still in the ring are gone.
    oldest = min((e.seq for e in log.entries if e.seq > last), default=log.total + 1)
    lost = max(0, oldest - last - 1)
    s.flush()
    return len(new), lost


def add_snapshot(s: Session, device_id: str, st: State, audit: AuditLog | None = None) -> tuple[Snapshot, int]:
    """Store an authenticated STATE and, with ``audit``, the audit log read in the same sync
    (add_audit); returns the snapshot and the number of audit entries new to the registry."""
    get_device(s, device_id)
    new, lost, total = 0, None, None
    if audit is not None:
        new, lost = add_audit(s, device_id, audit)
        total = audit.total
    b, r = st.budget, st.rate
    snap = Snapshot(device_id=device_id, day=b.day, recorded_day=b.recorded_day, daily_cap=b.daily_cap,
                    daily_spent=b.daily_spent, lifetime_cap=b.lifetime_cap, lifetime_spent=b.lifetime_spent,
                    epsilon_per_query=b.epsilon_micro, auth_counter=b.auth_counter, store=b.store,
                    store_ok=b.store_ok, rate_burst=r.burst, rate_per_minute=r.per_minute,
                    rate_tarpit_ms=r.tarpit_ms, audit_total=total, audit_lost=lost)
    s.add(snap)
    s.flush()
    return snap, new


def add_sync(s: Session, device_id: str, outcome: str, detail: str | None = None,
             snapshot: Snapshot | None = None) -> Sync:
    """Record one device's sync outcome (one of SYNC_OUTCOMES)."""
    if outcome not in SYNC_OUTCOMES:
        raise ValueError(f"sync outcome {outcome!r} is not one of {SYNC_OUTCOMES}")
    row = Sync(device_id=device_id, outcome=outcome, detail=detail,
               snapshot_id=snapshot.id if snapshot is not None else None)
    s.add(row)
    s.flush()
    return row


def add_training_run(s: Session, name: str, epsilon: float | None, delta: float, relation: str,
                     per_epoch: Sequence[float | None], manifest: str | None = None) -> TrainingRun:
    """A DP-SGD run with ε through each epoch (None entries and ε for a run that is not private)."""
    run = TrainingRun(name=name, epsilon=epsilon, delta=delta, relation=relation, manifest=manifest)
    s.add(run)
    s.flush()
    for i, e in enumerate(per_epoch, start=1):
        s.add(TrainingEpoch(run_id=run.id, epoch=i, epsilon=e))
    s.flush()
    return run
