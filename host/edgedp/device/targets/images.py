"""The images the targets run, built with make in the project tree (edgedp.paths).

Every image records the MODEL it was built with (build/<image>/model.txt, written by the
Makefile) and keeps a copy of that model's C data beside it (build/<image>/model.c). A stale
image is rebuilt with the MODEL it records -- the model the user built it with -- never with
the default; an image whose model file is gone runs as built."""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..errors import TransportError
from ...paths import build_dir, project_root

ARM_CC = "arm-none-eabi-gcc"
HOST_CC = "gcc"
INSTALL_HINT = ("install them (Debian/Ubuntu: apt-get install make gcc-arm-none-eabi libnewlib-arm-none-eabi; "
                "in a checkout `make setup` does it)")


def recorded_model(image: str) -> str | None:
    """The MODEL build/<image>/ was last built with, None before its first build."""
    stamp = build_dir() / image / "model.txt"
    try:
        text = stamp.read_text().strip()
    except FileNotFoundError:
        return None
    return text or None


def model_file(model: str) -> Path:
    """A MODEL value as a path (relative ones are relative to the project tree, as in make)."""
    p = Path(model)
    return p if p.is_absolute() else project_root() / p


def make(targets: Sequence[str], model: str | None = None, tools: Sequence[str] = (ARM_CC,)) -> None:
    """Run make in the project tree for ``targets`` (paths under build/), with MODEL=model if given."""
    missing = [t for t in ("make", *tools) if shutil.which(t) is None]
    if missing:
        raise TransportError(f"building {', '.join(targets)} needs {', '.join(missing)}, not found: {INSTALL_HINT}")
    argv = ["make", "-C", str(project_root()), *targets] + ([f"MODEL={model}"] if model else [])
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise TransportError(f"building {', '.join(targets)} in {project_root()} failed:\n"
                             f"{(r.stderr or r.stdout)[-2000:]}")


def ensure_built(image: str) -> Path:
    """build/<image>/edgedp.elf, built if missing and brought up to date with the MODEL it records."""
    out = build_dir() / image / "edgedp.elf"
    model = recorded_model(image) if out.exists() else None
    if model is not None and not model_file(model).is_file():
        return out  # the model it was built from is gone: run the image as it was built
    try:
        make([f"build/{image}/edgedp.elf"], model)
    except TransportError:
        if out.exists() and any(shutil.which(t) is None for t in ("make", ARM_CC)):
            return out  # no toolchain here: run the image as it was built
        raise
    return out
