"""The device key on the command line: the --key-file options and how a command gets its key."""
from __future__ import annotations

import click

from ..device.client import Device, load_key
from ..device.errors import EdgeDPError
from .config import config_default

key_option = click.option("--key-file", type=click.Path(dir_okay=False), default=config_default("key_file"),
                          help="Device HMAC key (64 hex digits; default: edgedp.toml's key_file). Test images "
                               "use tests/keys/test-device.key.")
admin_key_option = click.option("--key-file", type=click.Path(dir_okay=False),  # admin_key checks it is set
                                default=config_default("key_file"),
                                help="Device HMAC key file (64 hex digits; default: edgedp.toml's key_file), "
                                     "e.g. tests/keys/test-device.key.")


NEEDS_KEY = "this needs an authenticated command: pass --key-file"


def admin_key(key_file: str | None, what: str) -> bytes:
    """The key an admin command signs with: --key-file or edgedp.toml's key_file, never a silent
    fallback to the public test key."""
    if not key_file:
        raise click.UsageError(f"{what} needs the device key: pass --key-file (or set key_file in edgedp.toml)")
    return load_key(key_file)


def resolve_key(dev: Device, key_file: str | None) -> bytes:
    """The key from --key-file, or the bundled test key when talking to a test build.

    "A test build" is what the unauthenticated INFO says: a man in the middle can make a
    production device look like one. That is harmless: the test key is public, so signing with
    it grants nothing, and a production device (which does not hold it) refuses what it signs
    (ERR_AUTH, or NotAuthentic on STATE) before anything is charged or changed."""
    if key_file:
        return load_key(key_file)
    if dev.info().build == "test":
        return load_key()
    raise EdgeDPError(NEEDS_KEY, "ERR_AUTH")
