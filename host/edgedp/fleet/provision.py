"""Provisioning a device of the fleet: a fresh key in the keystore, an image built with it, and a
provisioning record in the registry (the key's fingerprint, never the key).

Boards (``BOARDS``): ``qemu`` is the qemu port's test image with the provisioned key in place of
the public test key (``make provisioned-qemu``): an emulated device whose noise seed is public,
so "emulated, not private" wherever it is shown. Its image lands in the keystore
(``<keystore>/images/<id>/edgedp.elf``, 0600 in 0700 folders: it holds the key); run it with
``--target qemu:<that path>``."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..device.targets.images import ARM_CC, make
from ..model.image import UnknownModel, image_model, model_dict
from ..version import __version__
from .keystore import Keystore, fingerprint
from .registry import Registry, add_provisioning

BOARDS = ("disco_f407vg", "nucleo_f429zi", "qemu")
"""The boards ``edgedp provision --board`` takes (docs/hardware.md names the two real ones)."""
EMULATED_BOARDS = ("qemu",)


@dataclass(frozen=True)
class Provisioned:
    id: str
    board: str
    image: Path
    image_sha256: str
    model: dict | None
    key_fingerprint: str

    def as_dict(self) -> dict:
        return {"id": self.id, "board": self.board, "image": str(self.image), "image_sha256": self.image_sha256,
                "model": self.model, "key_fingerprint": self.key_fingerprint,
                "emulated": self.board in EMULATED_BOARDS}


def provision(device_id: str, board: str, model: Path, keys: Keystore, reg: Registry) -> Provisioned:
    """Draw device_id's key, build its image for board with model, record it. On a failed build
    the new key is removed again (nothing was provisioned with it)."""
    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r}: use {', '.join(BOARDS)}")
    if board not in EMULATED_BOARDS:
        raise ValueError(f"--board {board}: provisioning with a keystore builds only the qemu board so far; for a "
                         "board, `edgedp provision --key-file KEY` builds the production image (docs/hardware.md)")
    if not model.is_file():
        raise ValueError(f"{model}: no such model file")
    key = keys.create(device_id)
    out = keys.folder / "images" / device_id
    try:
        make(["provisioned-qemu", f"KEY={keys.path(device_id).resolve()}", f"OUT={out.resolve()}"], str(model),
             (ARM_CC,))
    except BaseException:
        keys.remove(device_id)
        raise
    image = out / "edgedp.elf"
    try:
        full = model_dict(image_model(image))
        described = None if full is None else {"name": full["name"], "sha256": full["sha256"]}
    except UnknownModel:
        described = None
    p = Provisioned(device_id, board, image, hashlib.sha256(image.read_bytes()).hexdigest(), described,
                    fingerprint(key))
    with reg.session() as s:
        add_provisioning(s, device_id, board, described["name"] if described else None,
                         described["sha256"] if described else None, str(image), p.image_sha256,
                         p.key_fingerprint, __version__)
    return p
