"""edgedp deploy: turn a trained model into C data compiled into the firmware image."""
from __future__ import annotations

import click

from ..model import digits
from ..model.deploy import deploy as run_deploy
from ..paths import checkout_root
from .common import emit_json, handle_errors, json_option


@click.command()
@click.argument("model")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="C file to write, e.g. firmware/model/mine.c; build with `make firmware MODEL=that`.")
@click.option("--seed", type=int, default=digits.SEED, show_default=True,
              help="Built-in models: digits split and training seed.")
@click.option("--teachers", type=int, default=30, show_default=True, help="digits-ensemble: teachers T.")
@click.option("--input-range", nargs=2, type=float, default=None, metavar="LO HI",
              help="Range the device clamps every input to before the model runs "
                   "[default: the training data's range; required for .joblib files].")
@click.option("--data", type=click.Path(dir_okay=False), default=None, metavar="FILE.npz",
              help="Your labelled data (arrays X, y): score the device kernels against the float model on it "
                   "(accuracy of both, agreement).")
@click.option("--allow-non-private", is_flag=True,
              help="Deploy an `edgedp train` model whose manifest says it is not private (a --seed run); "
                   "the C file and the manifest then say so.")
@click.option("--int8", "int8", is_flag=True,
              help="int8 kernels (docs/model.md): per-channel int8 weights, int8 activations calibrated "
                   "on training inputs; about a quarter of the flash.")
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False),
              help="--int8: inputs (.npy, n x features) that set the activation scales; built-ins "
                   "default to their training inputs.")
@json_option
@handle_errors
def deploy(model: str, out: str, seed: int, teachers: int, input_range: tuple[float, float] | None,
           data: str | None, allow_non_private: bool, int8: bool, calibration: str | None,
           as_json: bool) -> None:
    """Write MODEL as C data for the image.

    MODEL is a scikit-learn LogisticRegression or MLPClassifier (.joblib), a list of them (.joblib:
    a teacher ensemble, output = vote histogram, range [0, T], sensitivity 2), the `edgedp train`
    model file (.npz with its manifest), or a built-in trained here on the digits:
    digits-ensemble, digits-logreg, digits-mlp. Then `edgedp build --model OUT` builds the images the
    device commands run.

    The image clamps every input to the model's declared input range before the model runs
    (docs/privacy.md section 5): the training data's range by default, --input-range to set it.
    With --int8 that range is also the int8 input's scale."""
    if calibration and not int8:
        raise click.UsageError("--calibration only applies with --int8")
    d = run_deploy(model, out, seed, teachers, data, allow_non_private, input_range, int8, calibration)
    if as_json:
        emit_json(d.as_dict())
        return
    if d.non_private:
        click.echo(f"edgedp: warning: deploying a model that is not private: {d.non_private}", err=True)
    shape = f"an int8 graph of {d.graph_ops} operators" if d.graph_ops is not None else f"{d.nets} net(s)"
    click.echo(f"{d.out}: {d.name}, {d.head} head, {shape}, {d.n_features} inputs -> "
               f"{d.n_classes} outputs in [{d.lo:g}, {d.hi:g}], sensitivity {d.sensitivity:g}")
    click.echo(f"  inputs clamped to [{d.input_range[0]:g}, {d.input_range[1]:g}] "
               f"({d.input_range_source})")
    click.echo(f"  {d.weights} {'int8' if d.int8 else 'float32'} parameters = {d.flash_weight_bytes} bytes of flash, "
               f"{d.scratch_ram_bytes} bytes of scratch RAM"
               + (f" ({d.arena_bytes} bytes of arena)" if d.arena_bytes is not None else "")
               + f", {d.macs} multiply-adds per inference")
    click.echo(f"  the STM32F4 image leaves {d.flash_free} bytes of flash and {d.ram_free} of RAM for a model")
    if d.device_accuracy is not None:
        click.echo(f"  accuracy on {d.scored_on} ({d.scored_records} records): float model {d.float_accuracy:.4f}, "
                   f"device kernels {d.device_accuracy:.4f} (same label on {d.agreement:.2%})")
    else:
        click.echo("  (pass --data FILE.npz with your labelled X, y to check the device kernels on your data)")
    click.echo(f"  build the images with it: edgedp build --model {d.out}"
               + (f"   (in this checkout also: make firmware MODEL={d.out})" if checkout_root() else ""))
