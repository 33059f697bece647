"""edgedp host tooling: talk to the DP output layer, replay it, measure it, evaluate it.

The device API is importable from here (loaded on first use, so ``edgedp --help`` stays fast)::

    from edgedp import Mode, open_device

    with open_device("qemu") as dev:
        r = dev.query(probs, Mode.parse("topk:3"))
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

_PUBLIC = {
    "open_device": "device.client", "connect": "device.client", "Device": "device.client",
    "load_key": "device.client",
    "MechConfig": "mech.types", "Caps": "mech.types", "QueryResult": "mech.types",
    "Budget": "device.protocol", "Info": "device.protocol",
    "EdgeDPError": "device.errors", "DeviceError": "device.errors", "TransportError": "device.errors",
    "ErrorCode": "device.errors",
    "Mode": "mech.modes", "ReferenceDevice": "mech.reference",
    "MICRO": "mech.lattice", "to_micro": "mech.lattice", "to_epsilon": "mech.lattice",
}
__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:
    from .device.client import Device, connect, load_key, open_device
    from .device.errors import DeviceError, EdgeDPError, ErrorCode, TransportError
    from .device.protocol import Budget, Info
    from .mech.lattice import MICRO, to_epsilon, to_micro
    from .mech.types import Caps, MechConfig, QueryResult
    from .mech.modes import Mode
    from .mech.reference import ReferenceDevice


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'edgedp' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
