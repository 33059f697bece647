"""edgedp build: the firmware images with a given model (what `make firmware MODEL=...` does in a checkout)."""
from __future__ import annotations

from pathlib import Path

import click

from ..device import session
from ..device.targets.images import ARM_CC, HOST_CC, make
from ..model.image import UnknownModel, image_model, model_dict
from ..paths import build_dir, checkout_root, project_root
from .common import emit_json, handle_errors, json_option

DEFAULT_MODEL = "firmware/model/digits_ensemble.c"
# target -> (image directory under build/, its file, the compiler it needs)
IMAGES = {"qemu": ("qemu", "edgedp.elf", ARM_CC), "qemu:stm32f4": ("stm32f4", "edgedp.elf", ARM_CC),
          "posix": ("posix", "edgedp", HOST_CC)}


@click.command()
@click.option("--model", "model_path", type=click.Path(dir_okay=False), default=None,
              help="Model C data written by `edgedp deploy` (default: the bundled digits ensemble; "
                   "firmware/model/none.c: no model).")
@click.option("--target", "-t", "targets", type=click.Choice(list(IMAGES)), multiple=True,
              help="Image(s) to build (repeatable; default: qemu and qemu:stm32f4).")
@json_option
@handle_errors
def build(model_path: str | None, targets: tuple[str, ...], as_json: bool) -> None:
    """Build the firmware images with a model; later device commands run them."""
    if model_path is None:
        model = project_root() / DEFAULT_MODEL
    else:
        model = Path(model_path).expanduser().resolve()
        if not model.is_file():
            raise ValueError(f"{model_path}: no such model file (write one with `edgedp deploy MODEL --out FILE.c`)")
        if model.suffix != ".c":
            raise ValueError(f"{model_path}: the model must be the C file `edgedp deploy` writes (FILE.c)")
    targets = targets or ("qemu", "qemu:stm32f4")
    outs = []
    for t in targets:
        image, file, cc = IMAGES[t]
        make([f"build/{image}/{file}"], str(model), (cc,))
        outs.append(build_dir() / image / file)
    described: dict | str | None
    try:
        described = model_dict(image_model(outs[0]))
    except UnknownModel as exc:
        described = f"unknown: {exc}"
    running = session.running()
    images = [str(p) for p in outs]
    d = {"model_file": str(model), "model": described, "images": images,
         "tree": str(project_root()), "checkout": checkout_root() is not None}
    if as_json:
        emit_json(d)
    else:
        name = described["name"] if isinstance(described, dict) else ("no model" if described is None else model.name)
        for p in outs:
            click.echo(f"built {p} with {name} ({model})")
    if running is not None and running.elf in images:
        click.echo(f"note: the running device session (pid {running.pid}) still runs the image it started with: "
                   "`edgedp device stop` and `edgedp device start` run the new one", err=True)
