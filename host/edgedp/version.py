"""The package version (a leaf: every layer may read it): the firmware's EDP_FIRMWARE_VERSION
(firmware/core/include/edgedp/options.h, through the generated schema), the project's one version."""
from .schema import FIRMWARE_VERSION as __version__

__all__ = ["__version__"]
