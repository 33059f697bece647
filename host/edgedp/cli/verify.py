"""edgedp verify: bit-exact replay against the reference plus a chi-square of device noise."""
from __future__ import annotations

import contextlib

import click

from ..analysis.jsonable import finite_json
from ..device.client import open_device
from ..device.verify import noise_fit, replay
from .common import emit_json, handle_errors, json_option, progress, progress_option, target_option
from ..mech.lattice import to_epsilon
from .device import key_option, resolve_key
from .output import StopRequest


@click.command()
@target_option
@click.option("--queries", "-n", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--samples", type=click.IntRange(1000), default=100000, show_default=True,
              help="Noise samples for the chi-square (at least 1000).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the inputs and the test stream key.")
@key_option
@json_option
@progress_option
@handle_errors
def verify(target: str | None, queries: int, samples: int, seed: int, key_file: str | None, as_json: bool,
           no_progress: bool) -> None:
    """Replay N varied queries bit for bit and test >= 1e5 noise samples (test builds).

    Re-keys the DRBG (TEST_SEED) and reconfigures epsilon and range on the way; restores the
    mechanism configuration afterwards. A production image is refused at once. Ctrl-C (or
    SIGTERM) stops after the answer in flight: the queries compared so far and the budget they
    spent, exit 130 (143); a signal after the last answer prints the verdict first. --json writes
    the result (``complete`` false when stopped early; ``epsilon_spent`` from STATE) in every case."""
    stop = StopRequest()
    with contextlib.ExitStack() as deferred, open_device(target) as dev:  # (device closed, then handlers back)
        dev.require_replayable("verify")
        key = resolve_key(dev, key_file)
        dev.set_time_if_unset(key)
        before = dev.state(key).budget  # restored afterwards: only from the authenticated state
        deferred.enter_context(stop.deferring_signals())
        try:
            res = replay(dev, key, queries, seed, progress=progress(no_progress), stop=stop.__bool__)
            fit = None if stop else noise_fit(dev, samples, progress=progress(no_progress), stop=stop.__bool__)
            if fit is not None:
                res.samples, res.chi2_pvalue, res.chi2_statistic, res.chi2_dof = (fit.n, fit.pvalue, fit.statistic,
                                                                                  fit.dof)
        finally:
            dev.configure(key, before.config, before.caps)
        # read now, for a signal that comes later too (during the close): only from the authenticated state
        spent = to_epsilon(dev.state(key).budget.daily_spent - before.daily_spent)
    # the handlers are back: every first signal is in ``stop`` now
    complete = fit is not None
    if as_json:
        # (no chi-square yet: "nan", still valid JSON)
        emit_json(finite_json({**res.as_dict(), "complete": complete, "epsilon_spent": spent}))
    elif complete:
        click.echo(f"queries        {res.queries}")
        click.echo(f"mismatches     {res.mismatches}")
        for mode, (n, bad) in sorted(res.by_mode.items()):
            click.echo(f"  {mode:10s} {n:5d} queries, {bad} mismatches")
        click.echo(f"noise samples  {res.samples}")
        click.echo(f"chi-square     {res.chi2_statistic:.1f} on {res.chi2_dof} dof, p = {res.chi2_pvalue:.4f}")
        click.echo("verdict        " + ("PASS" if res.ok else "FAIL"))
    else:
        click.echo(f"queries        {res.queries}\nmismatches     {res.mismatches}")
    if complete:
        stop.end(f"every query and noise sample ({res.mismatches} mismatches; spent {spent:g} epsilon, "
                 "authenticated STATE): the verdict is complete")
    else:
        what = ("every query, not all noise samples" if res.queries == queries
                else f"{res.queries} of {queries} queries")
        stop.end(f"{what} ({res.mismatches} mismatches; spent {spent:g} epsilon, authenticated STATE); no verdict")
    if not res.ok:
        raise SystemExit(1)
