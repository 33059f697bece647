"""The exit-code table and shell completion of the `edgedp` command (no device)."""
from __future__ import annotations

import os
import subprocess

from edgedp import paths
from edgedp.cli.exit_codes import ExitCode

from ..helpers import EDGEDP, cli_env, run_cli


def test_the_table_is_distinct() -> None:
    codes = [int(c) for c in ExitCode]
    assert len(set(codes)) == len(codes)
    assert (ExitCode.USAGE, ExitCode.TRANSPORT, ExitCode.BAD_INPUT, ExitCode.STATE_UNKNOWN, ExitCode.REFUSED,
            ExitCode.INTERRUPTED) == (2, 3, 4, 6, 8, 130)


def test_the_device_errors_carry_their_row_of_the_table() -> None:
    from edgedp.device import errors as E
    from edgedp.cli.exit_codes import for_exception
    for cls, code in ((E.EdgeDPError, ExitCode.FAILED), (E.TransportError, ExitCode.TRANSPORT),
                      (E.StateMismatch, ExitCode.STATE_MISMATCH), (E.StateUnknown, ExitCode.STATE_UNKNOWN),
                      (E.NotAuthentic, ExitCode.NOT_AUTHENTIC)):
        assert cls.exit_code == code and for_exception(cls("x")) == code, cls
    assert for_exception(E.DeviceError(E.ErrorCode.ERR_BUDGET, 0)) == ExitCode.REFUSED
    assert for_exception(E.EdgeDPError("pass --key-file", "ERR_AUTH")) == ExitCode.REFUSED
    assert for_exception(ValueError("x")) == ExitCode.BAD_INPUT


def test_shell_completion_lists_commands() -> None:
    r = run_cli(env={"_EDGEDP_COMPLETE": "bash_complete", "COMP_WORDS": "edgedp qu", "COMP_CWORD": "1",
                     "EDGEDP_CONFIG": None})
    assert "query" in r.stdout, r.stdout + r.stderr


def test_sample_without_an_epsilon_is_a_usage_error(tmp_path, monkeypatch) -> None:
    """--epsilon has edgedp.toml's value as its default, so click cannot enforce it: the command
    says what is missing (exit 2), never a traceback."""
    from click.testing import CliRunner
    from edgedp.cli import main
    (tmp_path / "edgedp.toml").write_text("[defaults]\n")  # no epsilon there either
    monkeypatch.setenv("EDGEDP_CONFIG", str(tmp_path / "edgedp.toml"))
    r = CliRunner().invoke(main, ["sample", "--target", "posix", "--n", "10", "--out", str(tmp_path / "z.npy")])
    assert r.exit_code == 2 and "needs --epsilon" in r.output, (r.exit_code, r.output, r.exception)
    assert "Traceback" not in r.output and not (tmp_path / "z.npy").exists()


def test_a_second_signal_interrupts_with_its_own_code() -> None:
    """During a deferred stop (query, bench) the first signal is recorded; the second interrupts
    at once: SIGTERM as Terminated (exit 143), SIGINT as KeyboardInterrupt (130)."""
    import signal

    import click
    import pytest
    from edgedp.cli import signals
    from edgedp.cli.output import StopRequest
    for signum, code in ((signal.SIGTERM, ExitCode.TERMINATED), (signal.SIGINT, ExitCode.INTERRUPTED)):
        stop = StopRequest()
        stop._handler(signum, None)
        assert stop.signal == signum and bool(stop) and signals.exit_code(signum) == code
        with pytest.raises(KeyboardInterrupt) as e:
            stop._handler(signum, None)
        assert isinstance(e.value, signals.Terminated) == (signum == signal.SIGTERM)
        try:  # click's main wraps it in Abort; the code still follows the signal
            raise click.exceptions.Abort() from e.value
        except click.exceptions.Abort as abort:
            assert signals.ended(abort)[0] == code == signals.ended(e.value)[0]


def test_deferring_signals_outside_the_main_thread_leaves_the_handlers_alone() -> None:
    """A StopRequest used from a worker thread (an embedding program's) runs its block and puts
    nothing back: Python allows signal.signal only in the main thread."""
    import signal
    import threading

    from edgedp.cli.output import StopRequest
    before, ran, errors = signal.getsignal(signal.SIGINT), [], []

    def worker() -> None:
        try:
            with StopRequest().deferring_signals():
                ran.append(True)
        except Exception as exc:  # noqa: BLE001 (the test reports it)
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert (ran, errors) == ([True], []) and signal.getsignal(signal.SIGINT) is before


def test_an_error_after_a_first_signal_ends_with_the_summary(capsys) -> None:
    """StopRequest.summary_on_error: before a signal an EdgeDPError goes on with its own code;
    after one, the report runs (it shows what was answered) and the command ends with the
    interrupted summary, the error as its cause and the signal's code; a failed link adds that an
    answer lost with it may have been charged; anything but an EdgeDPError goes on."""
    import signal

    import pytest
    from edgedp.cli.output import StopRequest
    from edgedp.device.errors import DeviceError, EdgeDPError, ErrorCode, TransportError
    reported: list[int] = []

    def report() -> str:
        reported.append(1)
        print("row 0 answered")
        return "1 of 2 rows"
    stop = StopRequest()
    with pytest.raises(TransportError), stop.summary_on_error(report):
        raise TransportError("no response")
    assert not reported
    stop._handler(signal.SIGTERM, None)
    with pytest.raises(ValueError), stop.summary_on_error(report):
        raise ValueError("bad input")
    lost = " (an answer lost with the link may have been charged)"
    for exc, tail in ((TransportError("no response"), lost), (DeviceError(ErrorCode.ERR_BUDGET, 0), "")):
        with pytest.raises(SystemExit) as e, stop.summary_on_error(report):
            raise exc
        out, err = capsys.readouterr()
        assert e.value.code == 143 and out == "row 0 answered\n", (out, err)
        assert err == f"edgedp: error: interrupted after 1 of 2 rows; then: {exc}{tail}\n", err
    stop = StopRequest()
    stop._handler(signal.SIGINT, None)
    with pytest.raises(SystemExit) as e, stop.summary_on_error(report, as_json=True):
        raise EdgeDPError("closing failed")
    out, err = capsys.readouterr()
    assert e.value.code == 130 and '"exit_code": 130' in out.splitlines()[-1], out


def blocked_on_a_fifo(tmp_path, **popen) -> tuple[subprocess.Popen, int]:
    """`edgedp query` reading its rows from a FIFO, and the FIFO's write end: opening it returns
    once the command has opened the read end (after main installed its handlers); the command
    then waits for rows."""
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    p = subprocess.Popen([str(EDGEDP), "query", "--target", "posix", "--json", str(fifo)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=cli_env(), **popen)
    return p, os.open(fifo, os.O_WRONLY)


def test_sigterm_before_any_device_is_143_in_one_line(tmp_path) -> None:
    """SIGTERM outside a deferred stop (here: query waiting for its rows) ends the command with
    143 and one error line (after click's blank line), not killed by the signal (-15) with no message."""
    import json
    import signal
    p, w = blocked_on_a_fifo(tmp_path)
    try:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        os.close(w)
    assert p.returncode == 143, (p.returncode, err)
    assert err == "\nedgedp: error: terminated\n" and json.loads(out)["exit_code"] == 143


def test_a_sigterm_the_parent_ignores_stays_ignored(tmp_path) -> None:
    """A parent that ignores SIGTERM for the command (SIG_IGN, inherited) keeps it ignored: the
    command goes on to its own end (here: no rows, exit 4), not 143."""
    import signal
    p, w = blocked_on_a_fifo(tmp_path, preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    p.send_signal(signal.SIGTERM)  # (delivered before the FIFO closes: a handler would have raised)
    os.close(w)
    _, err = p.communicate(timeout=30)
    assert p.returncode == ExitCode.BAD_INPUT, (p.returncode, err)
    assert "terminated" not in err


def test_main_gives_back_the_sigterm_handler_it_found(tmp_path) -> None:
    """`edgedp`'s main installs its SIGTERM handler for the command only: a program (here pytest)
    that invokes it in-process has its own handler back afterwards, however the command ended."""
    import signal

    from click.testing import CliRunner
    from edgedp.cli import main

    def mine(signum, frame) -> None:
        pass
    old = signal.signal(signal.SIGTERM, mine)
    try:
        for args, code in ((["budget", "--target", "nowhere"], 2), (["--version"], 0),
                           (["query", str(tmp_path / "none.npy")], 4)):
            r = CliRunner().invoke(main, args)
            assert r.exit_code == code, (args, r.output)
            assert signal.getsignal(signal.SIGTERM) is mine, args
    finally:
        signal.signal(signal.SIGTERM, old)


def test_an_empty_key_file_means_no_key() -> None:
    """`--key-file ""` (bench, query, ...) and audit-dp's `--key ""` mean the default test key,
    as for the device commands: bench and audit-dp hand their option to load_key, whose old
    load_key("") read the current directory ("Is a directory")."""
    from edgedp.device.client import load_key
    assert load_key("") == load_key(None) == bytes.fromhex(paths.test_key_path().read_text().strip())
