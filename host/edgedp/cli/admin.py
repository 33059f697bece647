"""The admin group (config, set-time, reset-budget, rate) and the authenticated configuration
it signs, which query uses too."""
from __future__ import annotations

import time

import click

from ..device import admin as authadmin
from ..device.client import Device, open_device
from ..device.errors import StateMismatch
from ..device.protocol import (CONFIG, RATE, RESET_BUDGET, SET_TIME, Budget, Caps, MechConfig, Rate, State,
                               config_payload, day_date)
from ..schema import SET_TIME_PAYLOAD_FMT
from ..mech.lattice import to_epsilon, to_micro
from .common import emit_json, handle_errors, json_option, note, target_option
from .keys import admin_key, admin_key_option
from .params import DAILY_CAP, DATE, EPSILON, LIFETIME_CAP, SENSITIVITY, UNIX_TIME, check_range
from .state import budget_dict, rate_dict


def merged_config(b: Budget, epsilon: float | None = None, sensitivity: float | None = None,
                  value_range: tuple[float, float] | None = None, m: int | None = None) -> MechConfig:
    """The device's mechanism configuration with the options the user gave replaced."""
    cur = b.config
    lo, hi = value_range if value_range is not None else (cur.lo, cur.hi)
    return MechConfig(cur.eps_micro if epsilon is None else to_micro(epsilon), lo, hi,
                      cur.sensitivity if sensitivity is None else sensitivity, cur.m if m is None else m)


def merged_caps(b: Budget, daily_cap: float | None = None, lifetime_cap: float | None = None) -> Caps:
    """The device's caps with the options the user gave replaced (lifetime 0: none); a lifetime
    cap below the daily cap is refused (the day could never spend its cap)."""
    caps = Caps(b.daily_cap if daily_cap is None else to_micro(daily_cap),
                b.lifetime_cap if lifetime_cap is None else to_micro(lifetime_cap))
    if caps.lifetime and caps.lifetime < caps.daily:
        raise click.UsageError(f"the lifetime cap {to_epsilon(caps.lifetime):g} is below the daily cap "
                               f"{to_epsilon(caps.daily):g} (a cap not given is the device's): raise "
                               "--lifetime-cap, lower --daily-cap, or give --lifetime-cap 0 for none")
    return caps


def config_check(cfg: MechConfig, caps: Caps) -> authadmin.Check:
    """The check that the state after CONFIG holds exactly cfg and caps."""
    def check(before: Budget, after: Budget) -> str | None:
        if not after.config.same_on_device(cfg):
            return f"mechanism {after.config} instead of {cfg}"
        if after.caps != caps:
            return f"caps {after.caps} instead of {caps}"
        return None
    return check


def configure_from_state(dev: Device, key: bytes, epsilon: float | None = None, sensitivity: float | None = None,
                         value_range: tuple[float, float] | None = None, m: int | None = None,
                         daily_cap: float | None = None, lifetime_cap: float | None = None,
                         state: State | None = None) -> authadmin.Outcome:
    """CONFIG with the options given, every other value from the authenticated state; verified after.

    ``state``: the STATE just read with ``key`` (nothing sent since), to sign for its nonce
    instead of reading another (authadmin.run)."""
    signed: list[tuple[MechConfig, Caps]] = []  # what each attempt signed (a retry builds from a fresh state)

    def build(b: Budget) -> bytes:
        signed.append((merged_config(b, epsilon, sensitivity, value_range, m), merged_caps(b, daily_cap, lifetime_cap)))
        return config_payload(*signed[-1])
    out = authadmin.run(dev, key, CONFIG, build, lambda before, after: config_check(*signed[-1])(before, after),
                        state)
    note_retried(out)
    return out


def note_retried(out: authadmin.Outcome) -> None:
    """One stderr line when the command had to be signed a second time, saying why."""
    if out.retried:
        note(f"note: {out.retried}; signed it again for the fresh nonce, which the device accepted "
             "(a peer on the link can draw a new nonce between the state read and the signed frame)")


@click.group()
def admin() -> None:
    """Authenticated administration (HMAC-SHA256 with the device key)."""


LOST_AT_EXIT = ("note: this device is an emulator started for this command only: the change is gone when it "
                "exits. `edgedp device start` runs one that keeps its configuration, clock and budget between "
                "commands (they then talk to it)")


def lost_at_exit(dev: Device) -> bool:
    """True when the device's state ends with this command (a fresh emulator, not a session)."""
    return not getattr(dev.target, "keeps_state", True)


def note_lost_at_exit(d: dict) -> None:
    if d["lost_at_exit"]:
        click.echo(LOST_AT_EXIT, err=True)


@admin.command("config")
@target_option
@admin_key_option
@click.option("--epsilon", "-e", type=EPSILON, help="Per-query epsilon.")
@click.option("--daily-cap", type=DAILY_CAP, help="Epsilon per UTC day.")
@click.option("--lifetime-cap", type=LIFETIME_CAP, default=None, help="Epsilon in total (0 = none).")
@click.option("--sensitivity", "-d", type=SENSITIVITY, default=None)
@click.option("--range", "value_range", type=float, nargs=2, default=None, metavar="LO HI", callback=check_range)
@click.option("--lattice-exponent", type=click.IntRange(-30, 30), default=None,
              help="Fix g = 2^-M, -30..30 (default: automatic).")
@json_option
@handle_errors
def admin_config(target: str | None, key_file: str, epsilon: float | None, daily_cap: float | None,
                 lifetime_cap: float | None, sensitivity: float | None, value_range: tuple[float, float] | None,
                 lattice_exponent: int | None, as_json: bool) -> None:
    """Set the mechanism and caps; unspecified values keep the device's (authenticated) ones.

    Reads the authenticated state, signs the change for its fresh nonce, and re-reads the state
    to check it holds exactly what was signed (exit 5 if not, 6 if the answer never came)."""
    key = admin_key(key_file, "admin config")
    with open_device(target) as dev:
        out = configure_from_state(dev, key, epsilon, sensitivity, value_range, lattice_exponent, daily_cap,
                                   lifetime_cap)
    d = {"accepted_counter": out.counter, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    if as_json:
        emit_json(d)
    else:
        a = out.after
        click.echo(f"configured (counter {out.counter}), checked in the authenticated state: epsilon "
                   f"{to_epsilon(a.epsilon_micro):g} per query, range [{a.lo:g}, {a.hi:g}], sensitivity "
                   f"{a.sensitivity:g}, daily cap {to_epsilon(a.daily_cap):g}, lifetime cap "
                   f"{to_epsilon(a.lifetime_cap) if a.lifetime_cap else 'none'}")
    note_lost_at_exit(d)


@admin.command("set-time")
@target_option
@admin_key_option
@click.option("--unix", "unix_seconds", type=UNIX_TIME, default=None, help="Seconds since 1970-01-01 UTC.")
@click.option("--date", "date", type=DATE, default=None, help="YYYY-MM-DD (midnight UTC); not with --unix.")
@json_option
@handle_errors
def admin_set_time(target: str | None, key_file: str, unix_seconds: int | None, date: int | None,
                   as_json: bool) -> None:
    """Set the device clock (default: this machine's clock)."""
    if date is not None and unix_seconds is not None:
        raise click.UsageError("give --unix or --date, not both")
    if date is not None:
        unix_seconds = date
    if unix_seconds is None:
        unix_seconds = int(time.time())
    key = admin_key(key_file, "admin set-time")
    day = unix_seconds // 86400

    def check(before: Budget, after: Budget) -> str | None:
        return None if after.day == day else f"day {after.day} instead of {day}"
    with open_device(target) as dev:
        out = authadmin.run(dev, key, SET_TIME, lambda b: SET_TIME_PAYLOAD_FMT.pack(unix_seconds), check)
        note_retried(out)
    d = {"accepted_counter": out.counter, "unix": unix_seconds, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    emit_json(d) if as_json else click.echo(f"clock set to {unix_seconds} ({day_date(day)}, counter {out.counter})")
    note_lost_at_exit(d)


@admin.command("reset-budget")
@target_option
@admin_key_option
@json_option
@handle_errors
def admin_reset_budget(target: str | None, key_file: str, as_json: bool) -> None:
    """Reset today's spend (the lifetime spend is never reset)."""
    key = admin_key(key_file, "admin reset-budget")

    def check(before: Budget, after: Budget) -> str | None:
        since = after.lifetime_spent - before.lifetime_spent  # answers after the reset, if any
        return None if after.daily_spent <= since else f"{to_epsilon(after.daily_spent):g} spent today"
    with open_device(target) as dev:
        out = authadmin.run(dev, key, RESET_BUDGET, lambda b: b"", check)
        note_retried(out)
    d = {"accepted_counter": out.counter, **budget_dict(out.after), "authenticated": True,
         "lost_at_exit": lost_at_exit(dev)}
    emit_json(d) if as_json else click.echo(f"daily budget reset (counter {out.counter})")
    note_lost_at_exit(d)


@admin.command("rate")
@target_option
@admin_key_option
@click.option("--burst", type=click.IntRange(0, 2**32 - 1), required=True,
              help="External answers the bucket holds (0: no rate limit).")
@click.option("--per-minute", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True,
              help="Answers added to the bucket per minute.")
@click.option("--tarpit-ms", type=click.IntRange(0, 2000), default=0, show_default=True,
              help="Delay before a refusal over the limit (ERR_RATE) leaves the device.")
@json_option
@handle_errors
def admin_rate(target: str | None, key_file: str, burst: int, per_minute: int, tarpit_ms: int, as_json: bool) -> None:
    """Limit the rate of external answers (QUERY, INFER): a token bucket; over it, ERR_RATE with the wait."""
    key = admin_key(key_file, "admin rate")
    want = Rate(burst, per_minute, tarpit_ms)
    payload = want.pack()
    with open_device(target) as dev:
        out = authadmin.run(dev, key, RATE, lambda b: payload, lambda before, after: None)
        note_retried(out)
    if out.rate != want:
        raise StateMismatch(f"after RATE the authenticated state is not what was signed: {out.rate}, not {want}")
    d = {"accepted_counter": out.counter, **rate_dict(out.rate), "authenticated": True}
    emit_json(d) if as_json else click.echo(
        f"rate limit: {'none' if not burst else f'{burst} answers, {per_minute} more per minute, tarpit {tarpit_ms} ms'}"
        f" (counter {out.counter}), checked in the authenticated state")


COMMANDS = [admin]
