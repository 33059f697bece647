"""edgedp.toml is read only when it is the user's own and belongs to the project or the user
(issue 39 item 1): a file owned by another user, writable by group or others, or in a folder
others can write is refused with the reason; the project search stops at the first folder that
is $HOME or holds .git, and outside both only $EDGEDP_CONFIG or the user's config is read; each
value taken from the file is named on stderr.

Every case runs the real command (`edgedp sample`): with the planted file taken, its target
("planted", no such target) ends the command with "unknown target"; with no file taken,
`sample` stops at "needs --epsilon" -- neither reaches a device."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ..helpers import one_line_error, run_cli

OTHER_UID = 4242
PLANTED = '[defaults]\ntarget = "planted"\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    (h / ".config").mkdir(parents=True)
    return h


def sample(cwd: Path, home: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    return run_cli("sample", "--n", "10", "--out", str(cwd / "z.npy"), cwd=cwd,
                   env={"EDGEDP_CONFIG": None, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **env})


def taken(r: subprocess.CompletedProcess[str], path: Path) -> bool:
    """The planted file gave the target: named on stderr, then refused as a target."""
    if "unknown target 'planted'" in r.stderr:
        assert r.stderr.startswith(f"edgedp: target planted from {path}\n"), r.stderr
        return True
    assert r.returncode == 2 and "needs --epsilon" in r.stderr, r.stderr
    return False


def project(home: Path, *parts: str) -> Path:
    """A git checkout under $HOME (its own .git), with the folders ``parts`` inside."""
    root = home / "proj"
    (root / ".git").mkdir(parents=True)
    d = root.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return root


def test_a_file_of_the_user_in_the_project_is_taken_and_named(home: Path) -> None:
    root = project(home, "sub")
    (root / "edgedp.toml").write_text(PLANTED)
    assert taken(sample(root / "sub", home), root / "edgedp.toml")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("where", ["project", "EDGEDP_CONFIG"])
def test_a_file_owned_by_another_user_is_refused(home: Path, where: str) -> None:
    root = project(home)
    f = root / "edgedp.toml"
    f.write_text(PLANTED)
    os.chown(f, OTHER_UID, OTHER_UID)
    r = sample(root, home, **({"EDGEDP_CONFIG": str(f)} if where == "EDGEDP_CONFIG" else {}))
    one_line_error(r, f"refusing configuration file {f}: owned by uid {OTHER_UID}")
    assert r.returncode == 2


@pytest.mark.parametrize("mode,who", [(0o664, "group"), (0o646, "others")])
def test_a_file_others_can_write_is_refused(home: Path, mode: int, who: str) -> None:
    root = project(home)
    f = root / "edgedp.toml"
    f.write_text(PLANTED)
    f.chmod(mode)
    r = sample(root, home)
    one_line_error(r, f"refusing configuration file {f}: writable by {who} (mode {mode:03o}); "
                      f"run: chmod go-w {f}")
    assert r.returncode == 2


def test_a_file_in_a_folder_others_can_write_is_refused_sticky_or_not(home: Path) -> None:
    """As /tmp: world-writable with the sticky bit, the file itself the user's and 0644."""
    root = project(home)
    f = root / "edgedp.toml"
    f.write_text(PLANTED)
    root.chmod(0o1777)
    one_line_error(sample(root, home), f"refusing configuration file {f}: its folder {root} is writable by "
                                       "group and others (mode 1777)")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_the_users_file_through_a_folder_of_another_user_is_refused(home: Path) -> None:
    root = project(home)
    f = root / "edgedp.toml"
    f.write_text(PLANTED)
    os.chown(root, OTHER_UID, OTHER_UID)
    one_line_error(sample(root, home), f"its folder {root} is owned by uid {OTHER_UID}")


def test_the_search_stops_at_the_checkout(home: Path) -> None:
    """A file above the folder holding .git is not the project's (the checkout is under $HOME)."""
    root = project(home, "sub")
    (home / "edgedp.toml").write_text(PLANTED)  # $HOME, above the checkout
    assert not taken(sample(root / "sub", home), home / "edgedp.toml")


def test_the_search_stops_at_home(home: Path) -> None:
    """Outside a checkout the search ends at $HOME: its file is taken, its parent's is not."""
    d = home / "a" / "b"
    d.mkdir(parents=True)
    (home.parent / "edgedp.toml").write_text(PLANTED)
    assert not taken(sample(d, home), home.parent / "edgedp.toml")
    (home.parent / "edgedp.toml").rename(home / "edgedp.toml")
    assert taken(sample(d, home), home / "edgedp.toml")


def test_outside_home_and_any_checkout_only_the_users_config_is_read(tmp_path: Path, home: Path) -> None:
    """A working directory outside $HOME and any checkout (as /tmp/x): its edgedp.toml is never
    read, even the user's own; the user's config directory still is."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "edgedp.toml").write_text('[defaults]\ntarget = "planted"\n')
    assert not taken(sample(outside, home), outside / "edgedp.toml")
    user = home / ".config" / "edgedp" / "edgedp.toml"
    user.parent.mkdir()
    user.write_text(PLANTED)
    assert taken(sample(outside, home), user)
