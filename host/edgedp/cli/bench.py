"""edgedp bench: instruction counts, cycle estimates and footprint of the DP step against the naive baseline."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from ..device.errors import EdgeDPError
from ..device.protocol import shown
from . import signals
from .common import emit_json, fail, handle_errors, json_option, note, progress, progress_option, target_option
from .exit_codes import ExitCode, for_exception
from .output import StopRequest
from .params import CLASSES, EPSILON, check_writable


@click.command()
@target_option
@click.option("--quick", is_flag=True, help="Few queries per point (a smoke run, noisier averages).")
@click.option("--queries", "-n", type=click.IntRange(1), default=None,
              help="Measured queries per (k, epsilon) point [default: 60 for k <= 10, 12 for 100, 4 for 1000].")
@click.option("--k", "ks", type=CLASSES, multiple=True, help="Class counts (repeatable) [default: 1 10 100 1000].")
@click.option("--epsilon", "epsilons", type=EPSILON, multiple=True,
              help="Per-query epsilons (repeatable) [default: 0.1 1 10].")
@click.option("--no-trace", is_flag=True, help="Skip the Unicorn trace (no cycle estimates, no breakdown).")
@click.option("--no-footprint", is_flag=True, help="Skip the per-module footprint (needs arm-none-eabi-gcc).")
@click.option("--no-deadline", is_flag=True,
              help="Skip each row's production release deadline (the timing image in Unicorn).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="PNG of cost against k [default: build/bench/bench.png].")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the tables of docs/benchmarks.md, each between markers that name the commit "
                   "and this command: into FILE's own markers if it has any (its prose is kept), else as a new "
                   "file of the tables alone (edgedp.bench.report).")
@click.option("--key-file", type=click.Path(dir_okay=False), default=None,
              help="Device HMAC key for CONFIG [default: tests/keys/test-device.key].")
@click.option("--models", "models_n", type=int, default=0, metavar="N",
              help="Also measure INFER on each bundled model's QEMU test image with N digits images "
                   "(inference vs DP step vs whole frame, and each model's production INFER deadline; "
                   "edgedp.bench.infer).")
@click.option("--e2e", "e2e_n", type=int, default=0, metavar="N",
              help="Also measure end-to-end answers per second with N k = 10 rows: the API (pipelined "
                   "and not) and the CLI, beside the 115,200-baud wire limit (edgedp.bench.e2e).")
@click.option("--peers", "peers_n", type=click.IntRange(0), default=0, metavar="N",
              help="Also run the bundled float models on CMSIS-DSP f32 and emlearn kernels (from PyPI, built "
                   "into build/peers/ with the image's flags) beside edgedp's, on N digits images, in Unicorn "
                   "(instructions, flash, RAM, outputs against the reference; edgedp.bench.peers).")
@click.option("--c-loop", is_flag=True,
              help="Also trace the same queries on the test image whose sampling loop is portable C "
                   "(build/qemu-cloop/edgedp.elf) and compare it with the Thumb-2 loop (the rule in "
                   "docs/benchmarks.md: assembly only if 10% below C at the grid's worst point).")
@click.option("--check", is_flag=True,
              help="Exit with code 1 if a gated speed or size target is MISSED (for CI; the JSON's \"missed\" lists "
                   "them; each target's line gives its figure and limit, the entropy ratio is informational).")
@json_option
@progress_option
@handle_errors
def bench(target: str | None, quick: bool, queries: int | None, ks: tuple[int, ...], epsilons: tuple[float, ...],
          no_trace: bool, no_footprint: bool, no_deadline: bool, plot_path: str | None, md_path: str | None, key_file: str | None,
          models_n: int, e2e_n: int, peers_n: int, c_loop: bool, check: bool, as_json: bool,
          no_progress: bool) -> None:
    """Cost of the exact DP step vs the naive rand()+logf baseline for k in 1..1000 and three epsilons.

    Reconfigures the device (per-query epsilon, large daily cap) with the test key; one warm-up
    query per (epsilon, k) builds the sampler table before the measured queries. Instructions come
    from the QUERY/NAIVE ticks (QEMU -icount: ticks / 1.344; Renode's DWT, virtual time at 42 MIPS:
    ticks / 4); test images only, a production image is refused at once. Cycles and microseconds at 168 MHz
    from the same frames replayed instruction by instruction in Unicorn with the Cortex-M4 timing
    table. Ctrl-C (or a device error) stops after the query in flight and still writes the points
    measured, marked "partial" with the "missing" ones (exit 130 for Ctrl-C). See docs/benchmarks.md."""
    from ..bench import run as bench_run

    if c_loop and no_trace:
        raise click.UsageError("--c-loop compares two Unicorn traces: drop --no-trace")
    cfg = bench_run.BenchConfig(trace=not no_trace, deadline=not no_deadline, footprint=not no_footprint,
                                key_file=key_file, c_loop=c_loop)
    if quick:
        cfg.queries = dict(bench_run.QUICK_QUERIES)
        cfg.reference_samples = 5000
    if queries is not None:
        cfg.queries = {k: queries for k in (ks or bench_run.KS)}
    if ks:
        cfg.ks = tuple(ks)
    if epsilons:
        cfg.epsilons = tuple(epsilons)
    say = (lambda msg: None) if not progress(no_progress) else (lambda msg: click.echo(f"  {msg}", err=True))
    for out in (plot_path, md_path):  # a file that cannot be written fails here, before the long run
        if out:
            check_writable(out)
    if models_n > 0:
        from ..bench import infer as bench_infer
    if e2e_n > 0:
        from ..bench import e2e as bench_e2e
    if peers_n > 0:
        from ..bench import peers as bench_peers
        bench_peers.sources()  # a missing peer fails here, before the long run
    stop = StopRequest()
    cause: EdgeDPError | None = None
    with stop.deferring_signals():  # Ctrl-C: stop after the query in flight, keep what was measured
        try:
            result = bench_run.run(target, cfg, progress=say, stop=lambda: bool(stop))
        except bench_run.Partial as p:
            result, cause = p.result, p.cause
        extras = (("infer", models_n, lambda: bench_infer.run(models_n, deadline=not no_deadline, progress=say)),
                  ("e2e", e2e_n, lambda: bench_e2e.run(e2e_n, progress=say)),
                  ("peers", peers_n, lambda: bench_peers.run(peers_n, progress=say)))
        for name, n, part in extras:
            if n <= 0:
                continue
            if stop or result.get("partial"):
                bench_run.mark_partial(result, result.get("stopped", "interrupted"), name)
                continue
            try:
                result[name] = part()
            except Exception as exc:  # noqa: BLE001 - the grid measured is kept, the error said
                cause = bench_run.part_error(name, exc)
                bench_run.mark_partial(result, str(cause), name)
        # Still deferred: what was measured is written before a signal can end the command, the
        # markdown before the plot, and a file that fails to write loses only itself.
        result["missed"] = bench_run.missed_targets(result["targets"])
        if md_path:
            _write_markdown(Path(md_path), result, _command(click.get_current_context()))
        try:
            result["plot"] = str(bench_run.plot(result, Path(plot_path) if plot_path else
                                                bench_run.default_plot_path()))
        except OSError as exc:
            result["plot"] = None
            note(f"warning: the plot was not written ({exc}); the results follow")
    if as_json:
        emit_json(result)
        _end(result, cause, stop)
        _check(check, result["missed"])
        return
    click.echo(f"edgedp bench on {shown(result['board'])} ({result['target']}), commit {result['commit']}")
    click.echo(f"ticks: {result['tick']['meaning']}")
    if result["trace"]["elf"]:
        click.echo(f"cycles: {result['trace']['timing']}, {result['trace']['assumption']}")
    click.echo(bench_run.table(result))
    measured = [r for r in result["rows"] if r.get("dp_us_measured") is not None]
    if measured:
        click.echo("measured on the target (" + result["tick"]["meaning"] + "): " + ", ".join(
            f"k={r['k']} eps={r['epsilon']:g}: {r['dp_us_measured']:.1f} us" for r in measured))
    conv = [r["conversion_max_error"] for r in result["rows"] if r.get("conversion_max_error") is not None]
    if conv:
        click.echo(f"tick -> instruction conversion: max |ticks/1.344 - traced| = {max(conv):.2f} instructions")
    h = result.get("host")
    if h:
        click.echo(f"host reference: {h['reference_samples_per_second']:,.0f} samples/s bit-exact, "
                   f"{h['fast_samples_per_second']:,.0f} samples/s vectorised")
    fp = result.get("footprint") or {}
    if "modules" in fp:
        click.echo(f"footprint ({fp['image']}): module  text data bss  linked")
        for m in fp["modules"]:
            click.echo(f"  {m['module']:8s} {m['text']:6d} {m['data']:4d} {m['bss']:4d}  {m['linked_flash']:6d}")
    elif fp:
        note(f"footprint: {fp.get('error')}")
    if "infer" in result:
        click.echo(bench_infer.markdown(result["infer"]))
    if "e2e" in result:
        click.echo(bench_e2e.markdown(result["e2e"]))
    if "peers" in result:
        click.echo(bench_peers.markdown(result["peers"]))
    for line in bench_run.describe_targets(result):
        click.echo(line)
    if result["plot"]:
        click.echo(f"plot: {result['plot']}")
    sys.stdout.flush()
    _end(result, cause, stop)
    _check(check, result["missed"])


def _command(ctx: click.Context) -> str:
    """This bench command as a user would type it: the options given, long names, in the
    command's order (the markers of the generated sections carry it)."""
    args = ["edgedp", "bench"]
    for p in ctx.command.params:
        if (not isinstance(p, click.Option) or not p.expose_value or p.name is None  # --timeout: the link's
                or p.name in ("as_json", "no_progress")):  # not the figures'
            continue
        value = ctx.params[p.name]
        if value in (None, False, (), 0) or value == p.default:
            continue
        opt = max(p.opts, key=len)
        if p.is_flag:
            args.append(opt)
            continue
        for v in value if p.multiple else (value,):
            args += [opt, f"{v:g}" if isinstance(v, float) else str(v)]
    return shlex.join(args)


def _write_markdown(path: Path, result: dict, command: str) -> None:
    """The generated sections into path (edgedp.bench.report): a document with markers keeps its
    prose; a failure to write loses only the file (a warning, the results still follow)."""
    from ..bench import report
    new = report.sections(result, command)
    try:
        old = path.read_text() if path.exists() else ""
        if report.parse(old):
            text, unplaced, kept = report.update(old, new)
            if unplaced:
                note(f"warning: {path} has no markers for {', '.join(unplaced)}: not written there")
            if kept:
                note(f"{path} keeps its sections {', '.join(kept)} from an earlier run (this one did not measure them)")
        else:
            text = "\n\n".join(s.text() for s in new) + "\n"
        path.write_text(text)
    except (OSError, UnicodeDecodeError, report.ReportError) as exc:
        note(f"warning: the markdown was not written ({exc}); the results follow")


def _end(result: dict, cause: EdgeDPError | None, stop: StopRequest) -> None:
    """A partial run, once its rows are out: one error line saying what is missing, and the exit
    code of what stopped it (the device error's, or 130 / 143 for Ctrl-C / SIGTERM)."""
    from ..bench import run as bench_run
    code = signals.exit_code(stop.signal) if stop.signal is not None else ExitCode.INTERRUPTED
    if not result.get("partial"):
        if stop.signal is not None:  # it came during the last part, which finished: nothing is missing
            fail(EdgeDPError("interrupted during the last part, which finished: the result is complete",
                             "ERR_INTERRUPTED"), False, code)
        return
    kept = bench_run.partial_note(result).rstrip(".")
    if cause is not None:
        fail(EdgeDPError(kept, cause.code), False, for_exception(cause))
    fail(EdgeDPError(kept, "ERR_INTERRUPTED"), False, code)


def _check(check: bool, missed: list[str]) -> None:
    """--check: a MISSED target fails the command (exit code 1, cli/exit_codes.py FAILED)."""
    if check and missed:
        click.echo(f"edgedp: error: bench targets MISSED: {', '.join(missed)}", err=True)
        sys.exit(ExitCode.FAILED)
