"""edgedp verify: bit-exact replay against the reference plus a chi-square of device noise."""
from __future__ import annotations

import contextlib

import click

from ..analysis.jsonable import finite_json
from ..device.client import open_device
from ..device.errors import EdgeDPError
from ..device.verify import VerifyResult, noise_fit, replay
from .common import emit_json, handle_errors, json_option, progress, progress_option, target_option
from ..mech.dlap import ChiSquare
from ..mech.lattice import to_epsilon
from .keys import key_option, resolve_key
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
    spent, exit 130 (143); a signal after the last answer prints the verdict first, and a link that
    fails after the signal still ends so (the spend then counted from the answers' ε, and whether
    the configuration was restored). --json writes the result (``complete`` false when stopped
    early; ``epsilon_spent`` from STATE) in every case."""
    stop = StopRequest()
    res, restored = VerifyResult(), False
    fit: ChiSquare | None = None

    def summary(spent: float, source: str) -> str:
        """The result so far on stdout (--json: the one document), and what the summary says was done."""
        complete = fit is not None
        if as_json:  # (no chi-square yet: "nan", still valid JSON)
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
            what, verdict = "every query and noise sample", ": the verdict is complete"
        else:
            what = ("every query, not all noise samples" if res.queries == queries
                    else f"{res.queries} of {queries} queries")
            verdict = "; no verdict"
        kept = "" if restored else "; the mechanism configuration was not restored (edgedp admin config)"
        return f"{what} ({res.mismatches} mismatches; spent {spent:g} epsilon, {source}){kept}{verdict}"

    def after_link_error() -> str:  # the device's STATE cannot be read: the spend the answers were charged
        return summary(to_epsilon(res.charged_micro), "the answers' ε as configured, counted here")

    with contextlib.ExitStack() as deferred, open_device(target) as dev:  # (device closed, then handlers back)
        dev.require_replayable("verify")
        key = resolve_key(dev, key_file)
        dev.set_time_if_unset(key)
        before = dev.state(key).budget  # restored afterwards: only from the authenticated state
        deferred.enter_context(stop.deferring_signals())
        deferred.enter_context(stop.summary_on_error(after_link_error))  # (exits before the handlers are back)
        try:
            replay(dev, key, queries, seed, progress=progress(no_progress), stop=stop.__bool__, res=res)
            fit = None if stop else noise_fit(dev, samples, progress=progress(no_progress), stop=stop.__bool__)
            if fit is not None:
                res.samples, res.chi2_pvalue, res.chi2_statistic, res.chi2_dof = (fit.n, fit.pvalue, fit.statistic,
                                                                                  fit.dof)
        except BaseException:
            with contextlib.suppress(EdgeDPError):  # the first error is reported; the summary says if not restored
                dev.configure(key, before.config, before.caps)
                restored = True
            raise
        dev.configure(key, before.config, before.caps)
        restored = True
        # read now, for a signal that comes later too (during the close): only from the authenticated state
        spent = to_epsilon(dev.state(key).budget.daily_spent - before.daily_spent)
    # the handlers are back: every first signal is in ``stop`` now
    stop.end(summary(spent, "authenticated STATE"))  # (shown in every case; the summary only after a signal)
    if not res.ok:
        raise SystemExit(1)
