"""Defaults from ``edgedp.toml``: the target, the device key file and the per-query ε.

The file is the first of: $EDGEDP_CONFIG (``/dev/null``: none); ``edgedp.toml`` in the working
directory or a parent of it up to and including the first folder that is $HOME or holds
``.git`` (the project; outside both no folder is searched); ``edgedp.toml`` in the user's
config directory (click.get_app_dir: ~/.config/edgedp on Linux). Only its ``[defaults]`` table
is read:

    [defaults]
    target = "session"          # like --target / EDGEDP_TARGET
    key_file = "keys/dev.key"   # like --key-file; relative to the file's folder
    epsilon = 0.5               # like --epsilon of query and sample

A file someone else could have written -- owned by another user, writable by group or others,
or in a folder that is (edgedp.trust) -- is refused (a usage error naming the reason), never
skipped for the next one. Each value taken from the file is announced on stderr when a command
uses it (``edgedp: epsilon 50 from /path/edgedp.toml``), also under -q; -v names the file.

An option on the command line, then an environment variable (EDGEDP_TARGET), beats the file."""
from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..trust import config_file_problem
from .verbosity import detail

FILE_NAME = "edgedp.toml"
KEYS: dict[str, tuple[type, ...]] = {"target": (str,), "key_file": (str,), "epsilon": (int, float)}


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    source: str  # "EDGEDP_CONFIG", "project" or "user"


def project_folders(here: Path | None = None) -> list[Path]:
    """The folders searched for the project's edgedp.toml, nearest first: ``here`` (the working
    directory) and its parents up to and including the first that is $HOME or holds .git; none
    if neither is above it."""
    here = here or Path.cwd()
    home = Path.home().resolve()
    folders = []
    for folder in (here, *here.parents):
        folders.append(folder)
        if folder == home or (folder / ".git").exists():
            return folders
    return []


def user_config_path() -> Path:
    return Path(click.get_app_dir("edgedp")) / FILE_NAME


def find_config() -> ConfigFile | None:
    """The configuration file to read (not yet checked), or None."""
    env = os.environ.get("EDGEDP_CONFIG")
    if env:
        return None if env == os.devnull else ConfigFile(Path(env), "EDGEDP_CONFIG")
    for folder in project_folders():
        if (folder / FILE_NAME).exists():
            return ConfigFile(folder / FILE_NAME, "project")
    user = user_config_path()
    return ConfigFile(user, "user") if user.exists() else None


@functools.cache
def config_path() -> Path | None:
    """The configuration file in use, or None; a usage error if it may not be the user's own."""
    found = find_config()
    if found is None:
        return None
    problem = config_file_problem(found.path)
    if problem:
        raise click.UsageError(f"refusing configuration file {found.path}: {problem}")
    detail(f"edgedp: configuration file {found.path} ({found.source})")
    return found.path


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
    """A click ``default=`` that reads ``key`` from the configuration file when the option is
    used, and says so on stderr (even under -q: the value may be signed or choose the device)."""
    def default() -> Any:
        value = load_defaults().get(key)
        if value is not None:
            click.echo(f"edgedp: {key} {value} from {config_path()}", err=True)
        return value
    default.__name__ = f"edgedp.toml {key}"
    return default


def forget() -> None:
    """Find and read the file again at the next use (each command run in-process starts here)."""
    config_path.cache_clear()
    load_defaults.cache_clear()
