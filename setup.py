"""The wheel carries what the device commands need at run time outside a checkout (host/edgedp/paths.py):
the firmware sources, the Makefile and the public test key, as package data under edgedp/_firmware."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
FIRMWARE_DATA = ["Makefile", "firmware", "renode", "tests/keys/test-device.key"]


class BuildPyWithFirmware(build_py):
    def run(self) -> None:
        super().run()
        dest = Path(self.build_lib) / "edgedp" / "_firmware"
        shutil.rmtree(dest, ignore_errors=True)
        for rel in FIRMWARE_DATA:
            src, out = ROOT / rel, dest / rel
            if not src.exists():
                raise FileNotFoundError(f"{src} is missing: build the wheel from a checkout or a complete sdist")
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.o", "*.elf", "__pycache__"))
            else:
                shutil.copy2(src, out)


setup(cmdclass={"build_py": BuildPyWithFirmware})
