"""`edgedp account --from-device` on the native device: the accounting takes the device's own
configuration (issue 18.4)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ..helpers import TEST_EPOCH, require

require("dp_accounting")  # edgedp.analysis.accounting

from edgedp.analysis import accounting as acc
from edgedp.cli import main
from edgedp.device.protocol import Caps, MechConfig
from edgedp.mech.lattice import MICRO

pytestmark = pytest.mark.native


def configured(posix_device, test_key: bytes, monkeypatch, cfg: MechConfig) -> None:
    """The native device configured with cfg and stopped, its state kept for the CLI's --target posix."""
    dev = posix_device.start()
    dev.set_time(test_key, TEST_EPOCH)
    dev.configure(test_key, cfg, Caps(daily=100 * MICRO))
    posix_device.stop()
    for k, v in posix_device.env.items():
        monkeypatch.setenv(k, v)


def test_account_from_device_reads_its_configuration(posix_device, test_key, tmp_path, monkeypatch) -> None:
    """`account --from-device` takes ε, Δ and the lattice exponent from a device's BUDGET answer."""
    configured(posix_device, test_key, monkeypatch, MechConfig(eps_micro=4 * MICRO, sensitivity=2.0, m=8))
    r = CliRunner().invoke(main, ["account", "--from-device", "--target", "posix", "-k", "1", "-n", "100", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["epsilon"], d["sensitivity"], d["exponent"], d["classes"]) == (4.0, 2.0, 8, 1)
    assert "read from the device" in d["device"]
    assert d["pld"] == pytest.approx(acc.compose(4.0, 100, 1e-6, acc.Mechanism(1, 2.0, 8)).pld)


def test_account_from_device_with_a_key_reads_the_authenticated_state(posix_device, test_key, monkeypatch) -> None:
    """With --key-file the configuration comes from STATE and says so; without, it is labelled
    unauthenticated (BUDGET)."""
    from edgedp import paths
    configured(posix_device, test_key, monkeypatch, MechConfig(eps_micro=3 * MICRO, sensitivity=1.0, m=9))
    args = ["account", "--from-device", "--target", "posix", "-k", "1", "-n", "10", "--json"]
    r = CliRunner().invoke(main, args + ["--key-file", str(paths.test_key_path())])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["epsilon"], d["sensitivity"], d["exponent"]) == (3.0, 1.0, 9)
    assert d["device_authenticated"] is True and "authenticated (STATE)" in d["device"]
    # k from INFO (no --classes) is not authenticated, and the result says so
    no_k = [a for a in args if a not in ("-k", "1")]
    d = json.loads(CliRunner().invoke(main, no_k + ["--key-file", str(paths.test_key_path())]).stdout)
    assert d["device_authenticated"] is False and "unauthenticated INFO" in d["device"]
    r = CliRunner().invoke(main, args)
    d = json.loads(r.stdout)
    assert d["device_authenticated"] is False and "unauthenticated (BUDGET" in d["device"]
