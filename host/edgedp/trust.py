"""Whether a file the tool reads is the user's own, by the rules ssh and git apply.

A configuration file (edgedp.toml) chooses the target, the key and ε, so one that someone else
could have written is not read: :func:`config_file_problem`. A key file is a secret, so one
that others can read or write is not used: :func:`key_file_problem`. Both return None for a
file that passes, else the one-line reason (the caller raises). Nothing here reads a file's
contents."""
from __future__ import annotations

import os
import stat
from pathlib import Path

GROUP_OTHER_WRITE = stat.S_IWGRP | stat.S_IWOTH
GROUP_OTHER_RW = stat.S_IRGRP | stat.S_IWGRP | stat.S_IROTH | stat.S_IWOTH


def _who(bits: int, group: int, other: int) -> str:
    return " and ".join(w for w, b in (("group", group), ("others", other)) if bits & b)


def _owner(uid: int) -> str:
    try:
        import pwd
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def config_file_problem(path: Path) -> str | None:
    """Why the configuration file ``path`` may not be the user's, or None: it is owned by another
    user, is writable by group or others, or lies in a directory that is writable by group or
    others (sticky bit or not: /tmp is refused) or owned by someone other than the user and root.
    A symbolic link is judged by the file it names and by both directories."""
    me = os.geteuid()
    try:
        st = path.stat()
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != me:
        return f"owned by {_owner(st.st_uid)}, not by you ({_owner(me)})"
    if st.st_mode & GROUP_OTHER_WRITE:
        return (f"writable by {_who(st.st_mode, stat.S_IWGRP, stat.S_IWOTH)} "
                f"(mode {stat.S_IMODE(st.st_mode):03o}); run: chmod go-w {path}")
    for folder in dict.fromkeys((path.absolute().parent, path.resolve().parent)):
        dst = folder.stat()
        if dst.st_mode & GROUP_OTHER_WRITE:
            return (f"its folder {folder} is writable by {_who(dst.st_mode, stat.S_IWGRP, stat.S_IWOTH)} "
                    f"(mode {stat.S_IMODE(dst.st_mode):03o}): anyone there could have put it there")
        if dst.st_uid not in (me, 0):
            return f"its folder {folder} is owned by {_owner(dst.st_uid)}, not by you ({_owner(me)}) or root"
    return None


def key_file_problem(path: Path) -> str | None:
    """Why the key file ``path`` is not private to its owner, or None: readable or writable by
    group or others. The reason ends with the chmod that fixes it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # reading it fails with its own reason
    if not mode & GROUP_OTHER_RW:
        return None
    how = " and ".join(w for w, bits in (("readable", stat.S_IRGRP | stat.S_IROTH),
                                         ("writable", stat.S_IWGRP | stat.S_IWOTH)) if mode & bits)
    who = _who(mode, stat.S_IRGRP | stat.S_IWGRP, stat.S_IROTH | stat.S_IWOTH)
    return f"key file {path} is {how} by {who}; run: chmod 600 {path}"
