"""The native build of the firmware (posix port) as a child process: fast, sanitizable."""
from __future__ import annotations

import os

from ...paths import build_dir
from .images import HOST_CC, make
from ..transport import Link, ProcessLink


class PosixTarget:
    """``posix`` runs build/posix/edgedp, ``posix:san`` the ASan/UBSan build.

    ``env`` passes the posix port's variables (EDP_STORE_FILE, EDP_POSIX_TIME, …)."""

    def __init__(self, sanitized: bool = False, env: dict[str, str] | None = None):
        image = "posix-san" if sanitized else "posix"
        exe = build_dir() / image / "edgedp"
        if not exe.exists():
            make([f"build/{image}/edgedp"], tools=(HOST_CC,))
        self.image = exe
        self.keeps_state = bool({**os.environ, **(env or {})}.get("EDP_STORE_FILE"))  # else RAM only
        self.name = "posix:san" if sanitized else "posix"
        self.private_link = True  # the native device's stdin/stdout pipes
        self._argv = [str(exe)]
        self._env = env or {}
        self._link = ProcessLink(self._argv, self._env)

    @classmethod
    def from_spec(cls, spec: str) -> "PosixTarget":
        return cls(sanitized=spec == "posix:san")

    def link(self) -> Link:
        return self._link

    def reset(self) -> None:
        """Power-cycle: end the process and start it again on the same store file."""
        self._link.close()
        self._link = ProcessLink(self._argv, self._env)

    def close(self) -> None:
        self._link.close()
