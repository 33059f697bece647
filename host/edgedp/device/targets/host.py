"""The native build of the firmware (host port) as a child process: fast, sanitizable."""
from __future__ import annotations

import subprocess

from ..errors import TransportError
from ...paths import build_dir, project_root
from ..transport import Link, ProcessLink


class HostTarget:
    """``host`` runs build/host/edgedp, ``host:san`` the ASan/UBSan build.

    ``env`` passes the host port's variables (EDP_STORE_FILE, EDP_HOST_TIME, …)."""

    def __init__(self, sanitized: bool = False, env: dict[str, str] | None = None):
        exe = build_dir() / ("host-san" if sanitized else "host") / "edgedp"
        if not exe.exists():
            target = "build/host-san/edgedp" if sanitized else "build/host/edgedp"
            r = subprocess.run(["make", "-C", str(project_root()), target], capture_output=True, text=True)
            if r.returncode != 0:
                raise TransportError(f"building {target} failed:\n{r.stderr[-2000:]}")
        self.name = "host:san" if sanitized else "host"
        self._argv = [str(exe)]
        self._env = env or {}
        self._link = ProcessLink(self._argv, self._env)

    @classmethod
    def from_spec(cls, spec: str) -> "HostTarget":
        return cls(sanitized=spec == "host:san")

    def link(self) -> Link:
        return self._link

    def reset(self) -> None:
        """Power-cycle: end the process and start it again on the same store file."""
        self._link.close()
        self._link = ProcessLink(self._argv, self._env)

    def close(self) -> None:
        self._link.close()
