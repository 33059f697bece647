"""Where the firmware sources, the public test key and the build outputs live.

In a checkout (this package imported from ``host/edgedp`` beside the Makefile) that is the
checkout: images are built in its ``build/``. An installed wheel carries the firmware sources,
the Makefile and the public test key as package data (``edgedp/_firmware``); they are copied once
per package content into the user cache directory and the images are built there. ``EDGEDP_ROOT``
names a checkout explicitly (e.g. to run an installed tool on a checkout's images);
``EDGEDP_CACHE_DIR`` (else ``$XDG_CACHE_HOME/edgedp``, else ``~/.cache/edgedp``) moves the cache."""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "_firmware"
TEST_KEY = Path("tests") / "keys" / "test-device.key"


def _is_tree(root: Path) -> bool:
    return (root / "Makefile").is_file() and (root / "firmware" / "sources.mk").is_file()


def checkout_root() -> Path | None:
    """EDGEDP_ROOT, else the checkout this package runs from; None for an installed wheel."""
    env = os.environ.get("EDGEDP_ROOT")
    if env:
        root = Path(env).expanduser().resolve()
        if not _is_tree(root):
            raise FileNotFoundError(f"EDGEDP_ROOT={env} is not an edgedp checkout (no Makefile and "
                                    "firmware/sources.mk there): unset it or point it at one")
        return root
    root = Path(__file__).resolve().parents[2]
    return root if _is_tree(root) else None


def cache_dir() -> Path:
    """The user cache directory of the installed tool (firmware copies and their builds)."""
    env = os.environ.get("EDGEDP_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edgedp"


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(x for x in root.rglob("*") if x.is_file()):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _packaged_root() -> Path:
    """The packaged firmware tree, copied to <cache>/firmware-<digest> (make writes build/ there)."""
    if not _is_tree(PACKAGED):
        raise FileNotFoundError(f"this edgedp install has no firmware sources ({PACKAGED} is missing) and "
                                "runs outside a checkout: reinstall the wheel, or set EDGEDP_ROOT to a checkout")
    dest = cache_dir() / f"firmware-{_tree_digest(PACKAGED)}"
    if not _is_tree(dest):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".firmware-", dir=dest.parent))
        shutil.copytree(PACKAGED, tmp, dirs_exist_ok=True)
        try:
            tmp.rename(dest)
        except OSError:  # another process copied it first
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def project_root() -> Path:
    """The tree make builds in: the checkout, or the installed tool's copy in the cache."""
    return checkout_root() or _packaged_root()


def build_dir() -> Path:
    return project_root() / "build"


def test_key_path() -> Path:
    """The public HMAC key built into test images (never a production key)."""
    return project_root() / TEST_KEY
