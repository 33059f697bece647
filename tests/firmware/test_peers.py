"""The float kernels' peers (edgedp.bench.peers): CMSIS-DSP f32 and emlearn harnesses, cross-compiled
with the image's flags and run in Unicorn on the bundled models, give the NumPy reference's outputs,
and the JSON carries what docs/benchmarks.md §6 reports.

CMSIS-DSP's sources come from PyPI (a 2 MB sdist, ``pip download`` into build/peers/cache once, about
a second; later runs are offline) and emlearn from the ``[peers]`` extra that ``[test]`` includes.
Without them (no network and no cache, or no emlearn) the tests skip, saying which is missing."""
from __future__ import annotations

import json

import numpy as np
import pytest

from edgedp.bench import peers


@pytest.fixture(scope="module")
def available() -> None:
    try:
        peers.sources(download=True)
    except peers.PeerError as exc:
        pytest.skip(f"peer sources not available: {exc}")


@pytest.fixture(scope="module")
def result(available: None) -> dict:
    return json.loads(json.dumps(peers.run(4)))  # what --json carries


def test_every_model_on_every_peer(result: dict) -> None:
    assert [r["model"] for r in result["models"]] == list(peers.MODELS)
    assert result["cmsis_dsp"] == "cmsisdsp-1.10.3" and result["emlearn"]
    assert "-mcpu=cortex-m4" in result["flags"] and "-ffp-contract=off" in result["flags"]
    for r in result["models"]:
        assert set(r["peers"]) == set(peers.PEERS) and r["inputs"] == 4
        for name, p in r["peers"].items():
            assert p["instructions"] >= p["instructions_mean"] > r["macs"], (r["model"], name)  # > 1 per multiply-add
            assert p["flash_bytes"] > 4 * r["macs"] and p["ram_bytes"] > 0 and p["stack_bytes"] > 0
            assert p["counted"] == ("edp_model_run" if name == "edgedp" else "peer_run")
        assert r["peers"]["edgedp"]["bit_exact"] and r["peers"]["edgedp"]["max_abs_diff"] == 0.0
        for name in ("cmsis_dsp", "emlearn"):
            assert r["peers"][name]["max_abs_diff"] <= (0.0 if r["head"] == "votes" else peers.TOLERANCE)
        assert r["ratio_cmsis_dsp"] == r["peers"]["edgedp"]["instructions"] / r["peers"]["cmsis_dsp"]["instructions"]
        assert r["ratio_emlearn"] == r["peers"]["edgedp"]["instructions"] / r["peers"]["emlearn"]["instructions"]
    ens = result["models"][-1]
    assert ens["nets"] == 30 and ens["cmsis_dsp_calls_per_net"]["arm_mat_vec_mult_f32"] == 1
    # emlearn keeps two activation buffers per net: the ensemble's RAM is 30 times edgedp's scratch
    assert ens["peers"]["emlearn"]["ram_bytes"] > 100 * ens["peers"]["edgedp"]["ram_bytes"]
    md = peers.markdown(result)
    assert md.count("\n| digits_") == 3 and "CMSIS-DSP 1.10.3" in md


def test_a_peer_that_disagrees_is_an_error(available: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A harness without its bias add gives other logits: run() refuses it rather than report it."""
    real = peers.cmsis_source
    monkeypatch.setattr(peers, "cmsis_source",
                        lambda model, k: "\n".join(l for l in real(model, k).splitlines() if "arm_add_f32(" not in l))
    with pytest.raises(peers.PeerError, match="digits_logreg on cmsis_dsp: outputs differ"):
        peers.run(2, models=("digits_logreg",))


def test_emlearn_weights_are_the_models_floats(available: None) -> None:
    """emlearn's generator prints 6 decimals; the harness holds the exact float32 weights."""
    from edgedp.model import cgen
    from edgedp.paths import project_root
    model = cgen.read(project_root() / "firmware" / "model" / "digits_logreg.c")
    src = peers.emlearn_source(model, 10)
    w = model.nets[0].layers[0].w
    assert "0.000000f" not in src and cgen._f(np.float32(w[0, 0])) in src


def test_a_harness_that_does_not_build_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The compiler's output goes to build.log; the error names it and the first error line."""
    monkeypatch.setattr(peers, "peers_dir", lambda: tmp_path)
    with pytest.raises(peers.PeerError) as e:
        peers._build("bad", "int peer_run(void) { return undeclared; }\n", [], [])
    assert "\n" not in str(e.value) and "undeclared" in str(e.value) and (tmp_path / "bad" / "build.log").exists()
