"""Defaults from ``edgedp.toml``: the target, the device key file and the per-query ε.

The file is the first of: $EDGEDP_CONFIG; ``edgedp.toml`` in the working directory or one of its
parents (the project); ``edgedp.toml`` in the user's config directory (click.get_app_dir:
~/.config/edgedp on Linux). Only its ``[defaults]`` table is read:

    [defaults]
    target = "session"          # like --target / EDGEDP_TARGET
    key_file = "keys/dev.key"   # like --key-file; relative to the file's folder
    epsilon = 0.5               # like --epsilon of query and sample

An option on the command line, then an environment variable (EDGEDP_TARGET), beats the file."""
from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

FILE_NAME = "edgedp.toml"
KEYS: dict[str, tuple[type, ...]] = {"target": (str,), "key_file": (str,), "epsilon": (int, float)}


def config_path() -> Path | None:
    """The configuration file in use, or None."""
    env = os.environ.get("EDGEDP_CONFIG")
    if env:
        return Path(env)
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / FILE_NAME).is_file():
            return folder / FILE_NAME
    user = Path(click.get_app_dir("edgedp")) / FILE_NAME
    return user if user.is_file() else None


@functools.cache
def load_defaults() -> dict[str, Any]:
    """The [defaults] of the configuration file ({} without one); a bad file is a usage error."""
    path = config_path()
    if path is None:
        return {}
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise click.UsageError(f"configuration file {path}: {exc}") from None
    extra = sorted(set(doc) - {"defaults"})
    if extra:
        raise click.UsageError(f"configuration file {path}: unknown table or key {extra[0]!r} "
                               "(only [defaults] is read)")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise click.UsageError(f"configuration file {path}: defaults must be a table")
    for key, value in defaults.items():
        if key not in KEYS:
            raise click.UsageError(f"configuration file {path}: unknown key defaults.{key} "
                                   f"(known: {', '.join(KEYS)})")
        if not isinstance(value, KEYS[key]) or isinstance(value, bool):
            raise click.UsageError(f"configuration file {path}: defaults.{key} must be a "
                                   f"{'number' if key == 'epsilon' else 'string'}, not {value!r}")
    if "key_file" in defaults:
        defaults["key_file"] = str(path.parent / Path(defaults["key_file"]).expanduser())
    return defaults


def config_default(key: str) -> Callable[[], Any]:
    """A click ``default=`` that reads ``key`` from the configuration file when the option is used."""
    def default() -> Any:
        return load_defaults().get(key)
    default.__name__ = f"edgedp.toml {key}"
    return default
