"""The ``edgedp`` command: one module per command group, imported only when its command runs.

``edgedp --help`` lists the commands from the table below without importing them, so it stays
fast, and a light install (no ``[analysis]`` or ``[bench]`` extra) runs the device commands;
a command whose extra is missing says which one to install."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from ..version import __version__
from ..device.errors import EdgeDPError
from . import config, signals
from .common import fail, set_verbosity
from .verbosity import warnings_as_notes
from .exit_codes import ExitCode


@dataclass(frozen=True)
class Entry:
    module: str   # edgedp.cli.<module>
    attr: str     # the click command in it
    summary: str  # how its help starts (tests/python/test_cli_light.py keeps them equal)
    extra: str = ""  # the pip extra its imports need, if any


COMMANDS: dict[str, Entry] = {
    "info": Entry("state", "info", "Board, build, entropy and firmware facts of a device."),
    "query": Entry("query", "query", "Stream rows of logits/probabilities (.npy, .npz, .csv, or - for stdin) "
                                      "through the device."),
    "sample": Entry("query", "sample", "Raw noise samples from the device (test builds), before output clamping."),
    "budget": Entry("state", "budget", "The privacy budget: today's and lifetime spend, caps, and the store's "
                                       "state."),
    "audit-log": Entry("state", "audit_log", "The device's audit log: admin commands, time sets, budget "
                                             "exhaustion, store loss, entropy failures and rate-limit trips, "
                                             "each with its day and admin counter."),
    "admin": Entry("admin", "admin", "Authenticated administration (HMAC-SHA256 with the device key)."),
    "device": Entry("device", "device", "A long-lived emulated device that keeps its state between commands."),
    "verify": Entry("verify", "verify", "Replay N varied queries bit for bit and test >= 1e5 noise samples "
                                        "(test builds)."),
    "demo": Entry("demo", "demo", "Build, boot the firmware in QEMU, stream real model outputs, show raw vs "
                                  "private and the budget."),
    "build": Entry("build", "build", "Build the firmware images with a model; later device commands run them."),
    "provision": Entry("build", "provision", "The production image with a device key, for the model it was built "
                                             "with."),
    "fleet": Entry("fleet", "fleet", "The fleet registry: devices, their authenticated budgets and audit logs "
                                     "(docs/fleet.md)."),
    "deploy": Entry("deploy", "deploy", "Write MODEL as C data for the image.", "analysis"),
    "account": Entry("analysis", "account", "Total epsilon of N answers of the device's mechanism (basic, "
                                            "advanced, PLD) with every per-answer term, or the largest daily "
                                            "query count for a lifetime target", "analysis"),
    "tradeoff": Entry("analysis", "tradeoff_cmd", "Top-1 accuracy and agreement with the non-private prediction "
                                                  "for each ε and output mode", "analysis"),
    "attack": Entry("analysis", "attack", "Attacks on the protected API: membership inference, model "
                                          "extraction.", "analysis"),
    "report": Entry("analysis", "report", "Pre-release privacy audit of a configuration: DIR/report.md, "
                                          "DIR/report.json and plots.", "analysis"),
    "bench": Entry("bench", "bench", "Cost of the exact DP step vs the naive rand()+logf baseline for k in "
                                     "1..1000 and three epsilons.", "bench"),
    "train": Entry("train", "train", "Train a logistic regression or small MLP with DP-SGD (per-example "
                                     "clipping, Poisson subsampling, Gaussian noise)", "train"),
    "audit-config": Entry("train", "audit_config", "Check a DP-SGD configuration (TOML/JSON file, an `edgedp "
                                                   "train` NAME.manifest.json, and/or flags) for the errors that "
                                                   "make its ε wrong", "train"),
    "audit-dp": Entry("audit", "audit_dp", "Empirical ε lower bound of the output mechanism from worst-case "
                                           "neighbouring inputs", "analysis"),
    "audit-train": Entry("audit", "audit_train", "Empirical ε lower bound of a DP-SGD configuration", "train"),
    "dashboard": Entry("dashboard", "dashboard", "A local, read-only web page of the fleet registry: ε per day, "
                                                 "lifetime against cap, rate limits, audit events, alerts and "
                                                 "DP-SGD runs.", "dashboard"),
}


VERBOSITY_FLAGS = ("-v", "--verbose", "-q", "--quiet")
"""The group's options that are also accepted after the command (LazyGroup.hoist_verbosity)."""


class LazyGroup(click.Group):
    """A group that imports a command's module on first use; usage errors are one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        return getattr(importlib.import_module(f"{__name__}.{entry.module}"), entry.attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, e.summary) for name, e in COMMANDS.items()])

    def hoist_verbosity(self, args: list[str]) -> list[str]:
        """``-q``/``-v`` (``--quiet``/``--verbose``) given after the command, as in ``edgedp query
        -v rows.npy``, moved before it, where the group takes them; a flag the command (or a
        subcommand of its group) defines itself stays (train's ``-q`` is its sampling rate), and so
        does everything after ``--``. The command is the first word that names one: the group's
        own options take no value."""
        end = args.index("--") if "--" in args else len(args)
        at = next((i for i in range(end) if args[i] in COMMANDS), None)
        if at is None:
            return args
        cmd = self.get_command(click.Context(self), args[at])
        own: set[str] = set()
        for c in [cmd, *(cmd.commands.values() if isinstance(cmd, click.Group) else [])]:
            for param in c.params if c is not None else []:
                own.update(getattr(param, "opts", []))
        moved = [a for a in args[at + 1:end] if a in VERBOSITY_FLAGS and a not in own]
        kept = [a for a in args[at + 1:end] if not (a in VERBOSITY_FLAGS and a not in own)]
        return args[:at] + moved + [args[at]] + kept + args[end:] if moved else args

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> NoReturn:
        """Click's main, with the exit codes of cli/exit_codes.py: a usage error is one line
        ``edgedp: error: <reason>`` (and one JSON object on stdout under --json), Ctrl-C is 130,
        SIGTERM 143 (cli/signals.py), a missing extra is named. It always exits with its code:
        ``standalone_mode`` is accepted for click's signature and ignored."""
        args = self.hoist_verbosity(list(sys.argv[1:] if args is None else args))
        as_json = "--json" in (args[:args.index("--")] if "--" in args else args)
        old_sigterm = signals.install()
        try:
            rv = self._main(args, as_json, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                            **extra)
        finally:
            signals.restore(old_sigterm)
        sys.exit(rv if isinstance(rv, int) else 0)

    def _main(self, args: list[str], as_json: bool, **kwargs: Any) -> Any:
        """Click's main, each failure turned into its exit code (SystemExit)."""
        try:
            return super().main(args, **kwargs)
        except ModuleNotFoundError as exc:
            extra = next((COMMANDS[a].extra for a in args if a in COMMANDS), "")
            if not extra:
                raise
            fail(click.ClickException(f"this command needs the [{extra}] extra ({exc.name} is not installed): "
                                      f"pip install 'edgedp[{extra}]'"), as_json, ExitCode.FAILED)
        except click.exceptions.NoArgsIsHelpError as exc:  # `edgedp`, `edgedp admin`: the help, as click shows it
            click.echo(exc.format_message(), err=True)
            sys.exit(ExitCode.USAGE)
        except click.ClickException as exc:
            fail(exc, as_json)
        except (click.exceptions.Abort, KeyboardInterrupt) as exc:
            code, what = signals.ended(exc)
            fail(EdgeDPError(what, "ERR_INTERRUPTED"), as_json, code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="edgedp")
@click.option("--verbose", "-v", "verbose", count=True, help="Details on stderr (timings, the device's facts).")
@click.option("--quiet", "-q", "quiet", is_flag=True, help="Errors only: no warnings, notes or progress bars (values taken from edgedp.toml are still named).")
def main(verbose: int, quiet: bool) -> None:
    """Differential-privacy output layer for Cortex-M4: device tools and privacy analysis.

    Exit codes: 0 ok, 1 a check failed, 2 usage, 3 transport, 4 bad input, 5 device state not as
    signed, 6 device state unknown, 7 answer not authentic, 8 device refusal, 130 interrupted,
    143 terminated (docs/cli.md). Defaults for --target, --key-file and
    --epsilon can live in edgedp.toml (only a file of your own; each value used is named on
    stderr, `edgedp info` names the file)."""
    if verbose and quiet:
        raise click.UsageError("-v and -q contradict each other")
    set_verbosity(-1 if quiet else min(verbose, 1))
    warnings_as_notes()
    config.forget()
