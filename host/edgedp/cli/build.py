"""edgedp build: the firmware images with a given model (what `make firmware MODEL=...` does in a checkout);
edgedp provision: the production image with a device key (`make provision`)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import click

from ..device import session
from ..device.client import load_key
from ..device.targets.images import ARM_CC, HOST_CC, make, model_file, recorded_model
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


@click.command()
@click.option("--key-file", type=click.Path(dir_okay=False),
              help="The device key (64 hex digits; not the public test key): build the production stm32f4 image "
                   "with it (without --id).")
@click.option("--id", "device_id", default=None,
              help="Provision a fleet device: a fresh key from the OS in the keystore under this id, its image, and "
                   "a record in the registry (docs/fleet.md).")
@click.option("--board", type=click.Choice(["disco_f407vg", "nucleo_f429zi", "qemu"]), default=None,
              help="With --id: the board (qemu: an emulated device, not private).")
@click.option("--keystore", type=click.Path(file_okay=False), default=None,
              help="With --id: the keystore folder (default: $EDGEDP_KEYSTORE, else edgedp/keys in the user data dir).")
@click.option("--registry", "registry_url", default=None, metavar="URL",
              help="With --id: the registry's SQLAlchemy URL (default: $EDGEDP_REGISTRY, else a SQLite file in the "
                   "user data dir).")
@click.option("--model", "model_path", type=click.Path(dir_okay=False), default=None,
              help="Model C data to build the image with [default: the model build/stm32f4/edgedp.elf was "
                   "built with (edgedp build --target qemu:stm32f4 --model ...)].")
@json_option
@handle_errors
def provision(key_file: str | None, device_id: str | None, board: str | None, keystore: str | None,
              registry_url: str | None, model_path: str | None, as_json: bool) -> None:
    """The production image with a device key, for the model it was built with.

    Writes build/stm32f4/edgedp-provisioned.elf (flash it whole) and edp_key.bin (the key alone,
    for sector 11), as `make provision` does (docs/hardware.md). The model is --model, else the one
    the image records; never the bundled default unless named: before the first build, --model is
    required. Prints the model and the sha256 of the image it provisions.

    With --id and --board instead: a fleet device (edgedp.fleet.provision; docs/fleet.md)."""
    if device_id is not None:
        if key_file or board is None:
            raise click.UsageError("--id takes --board and draws its own key: no --key-file")
        return provision_device(device_id, board, keystore, registry_url, model_path, as_json)
    if key_file is None:
        raise click.UsageError("pass --key-file KEY (the production stm32f4 image) or --id ID --board B (a fleet device)")
    key = load_key(key_file)
    if key == load_key():  # the test images' key
        raise ValueError(f"refusing the public test key ({key_file}): anyone can sign admin frames with it")
    if key in (bytes(32), bytes([255]) * 32):
        raise ValueError(f"{key_file}: an all-0x00 or all-0xFF key reads as unprovisioned")
    if model_path is None:
        recorded = recorded_model("stm32f4")
        if recorded is None:
            raise click.UsageError("build/stm32f4/edgedp.elf records no model (it was not built yet): pass --model, "
                                   f"e.g. --model {project_root() / DEFAULT_MODEL}")
        model = model_file(recorded)
    else:
        model = Path(model_path).expanduser().resolve()
    if not model.is_file():
        raise ValueError(f"{model}: no such model file")
    make(["provision", f"KEY={Path(key_file).resolve()}"], str(model), (ARM_CC,))
    image = build_dir() / "stm32f4" / "edgedp.elf"
    described: dict | str | None
    try:
        described = model_dict(image_model(image))
    except UnknownModel as exc:
        described = f"unknown: {exc}"
    d = {"provisioned": str(image.with_name("edgedp-provisioned.elf")), "key_bin": str(image.with_name("edp_key.bin")),
         "model_file": str(model), "model": described, "image": str(image),
         "image_sha256": hashlib.sha256(image.read_bytes()).hexdigest()}
    if as_json:
        emit_json(d)
        return
    name = described["name"] if isinstance(described, dict) else ("no model" if described is None else model.name)
    click.echo(f"provisioned {d['provisioned']}: model {name} ({model}), image {image} sha256 {d['image_sha256']}")


def provision_device(device_id: str, board: str, keystore: str | None, registry_url: str | None,
                     model_path: str | None, as_json: bool) -> None:
    """provision --id: a fleet device's key, image and record."""
    from ..fleet.keystore import Keystore, check_id
    from ..fleet.provision import provision as provision_fleet
    from ..fleet.registry import open_registry
    check_id(device_id)
    model = Path(model_path).expanduser().resolve() if model_path else project_root() / DEFAULT_MODEL
    with open_registry(registry_url) as reg:
        p = provision_fleet(device_id, board, model, Keystore(keystore), reg)
    d = p.as_dict()
    if as_json:
        emit_json(d)
        return
    name = d["model"]["name"] if d["model"] else "no model"
    click.echo(f"provisioned {device_id} ({board}{', emulated, not private' if d['emulated'] else ''}): image "
               f"{p.image} sha256 {p.image_sha256}, model {name}, key fingerprint {p.key_fingerprint}")
