"""The keystore: one fresh 256-bit device key per provisioned device id, in files only their
owner can read.

Where: ``$EDGEDP_KEYSTORE``, else ``edgedp/keys`` in the user data directory as platformdirs
names it (``~/.local/share/edgedp/keys`` on Linux). The folder is created 0700 and each key file
``<id>.key`` (64 hex digits, the format every ``--key-file`` reads) 0600; a keystore folder that
group or others can reach, or that another user owns, is refused, as ssh refuses ``~/.ssh``.
Keys are read through :func:`edgedp.device.client.load_key`, which refuses a key file others can
read (the trust issue's one rule). A key never leaves this module except to the image build and
the device link: records hold its :func:`fingerprint`."""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
from pathlib import Path

import platformdirs

from ..device.client import load_key

KEYSTORE_ENV = "EDGEDP_KEYSTORE"
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A device id: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64
characters (it names files and appears in every command's output)."""
KEY_BYTES = 32
FINGERPRINT_DOMAIN = b"edgedp key fingerprint v1\0"


class KeystoreError(ValueError):
    """A keystore or key that cannot be used as asked (the message says why and what to do)."""


def check_id(device_id: str) -> str:
    """device_id if it is a valid id (ID_PATTERN), else KeystoreError naming the rule."""
    if not ID_PATTERN.fullmatch(device_id):
        raise KeystoreError(f"device id {device_id!r} is not valid: use 1-64 letters, digits, '.', '_' or '-', "
                            "starting with a letter or digit")
    return device_id


def default_dir() -> Path:
    """$EDGEDP_KEYSTORE, else <user data dir>/edgedp/keys."""
    env = os.environ.get(KEYSTORE_ENV)
    return Path(env).expanduser() if env else platformdirs.user_data_path("edgedp") / "keys"


def fingerprint(key: bytes) -> str:
    """A public name of a key: the first 128 bits of SHA-256 over a domain prefix and the key,
    in hex (a preimage of a 256-bit random key is out of reach, so it reveals nothing)."""
    return hashlib.sha256(FINGERPRINT_DOMAIN + key).hexdigest()[:32]


class Keystore:
    """The key files of one keystore folder (``folder`` None: :func:`default_dir`)."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder).expanduser() if folder else default_dir()

    def _checked_folder(self, create: bool) -> Path:
        f = self.folder
        if create and not f.exists():
            old = os.umask(0o077)
            try:
                f.mkdir(parents=True, mode=0o700)
            finally:
                os.umask(old)
        try:
            st = f.stat()
        except FileNotFoundError:
            raise KeystoreError(f"keystore {f} does not exist (edgedp provision creates it; "
                                f"${KEYSTORE_ENV} names another)") from None
        if not stat.S_ISDIR(st.st_mode):
            raise KeystoreError(f"keystore {f} is not a folder")
        if st.st_uid != os.geteuid():
            raise KeystoreError(f"keystore {f} is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})")
        if st.st_mode & 0o077:
            raise KeystoreError(f"keystore {f} can be reached by group or others (mode "
                                f"{stat.S_IMODE(st.st_mode):03o}); run: chmod 700 {f}")
        return f

    def path(self, device_id: str) -> Path:
        """The key file of device_id (whether or not it exists)."""
        return self.folder / f"{check_id(device_id)}.key"

    def create(self, device_id: str) -> bytes:
        """A fresh key for device_id from the OS's generator, written 0600; KeystoreError if the id
        already has one (a device keeps its key: a second provisioning would lock out the first)."""
        path = self._checked_folder(create=True) / f"{check_id(device_id)}.key"
        key = secrets.token_bytes(KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            raise KeystoreError(f"device {device_id} already has a key ({path}): choose another id, or remove "
                                "that file (and the device's record) to provision it again") from None
        with os.fdopen(fd, "w") as f:
            f.write(key.hex() + "\n")
        return key

    def remove(self, device_id: str) -> None:
        """Delete device_id's key file (a provisioning that failed before it produced an image)."""
        self.path(device_id).unlink(missing_ok=True)

    def load(self, device_id: str) -> bytes:
        """device_id's key (load_key's checks: 64 hex digits, mode 0600); KeystoreError if none."""
        path = self._checked_folder(create=False) / f"{check_id(device_id)}.key"
        if not path.is_file():
            raise KeystoreError(f"no key for device {device_id} in keystore {self.folder} (provision it with "
                                f"`edgedp provision --id {device_id} ...`, or name its keystore with --keystore)")
        return load_key(path)
