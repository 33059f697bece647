"""The C core as another firmware vendors it: a public API of a few headers (the rest internal),
CMake and PlatformIO library descriptions that list exactly the core sources, a consumer build
(template port + app, with the public headers alone) through CMake with the host compiler and
the ARM cross compiler, unique object names in an archive, and floating-point contraction
pinned off in the sources whatever the build's -std."""
from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from edgedp.bench.footprint import make_vars

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "firmware" / "core"
PUBLIC = {"edgedp.h", "device.h", "error.h", "model.h", "options.h", "port.h"}
"""The public API: firmware/core/include/edgedp/ holds these and nothing else."""
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
FUSED = re.compile(r"\bv(fma|fms|fnma|fnms|mla|mls|nmla|nmls)\.f32\b")


def core_sources() -> list[str]:
    """EDP_CORE_SRCS of firmware/sources.mk, relative to firmware/core."""
    srcs = make_vars(ROOT / "firmware" / "sources.mk")["EDP_CORE_SRCS"].split()
    return sorted(str(Path(s).relative_to("firmware/core")) for s in srcs)


def run(argv: list[str], cwd: Path) -> str:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(argv)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def configure_probe(tmp_path: Path, core: Path, probe: str) -> str:
    """cmake's configure output for an application that adds the core at ``core`` and then runs
    the CMake lines ``probe`` (which print what a test reads)."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.13)\nproject(probe C)\n"
                                        f"add_subdirectory({core} edgedp)\n" + probe)
    return run(["cmake", "-S", str(app), "-B", str(tmp_path / "b")], tmp_path)


def test_core_base_names_are_unique() -> None:
    names = [Path(s).name for s in core_sources()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_cmake_reads_the_core_sources_from_sources_mk(tmp_path: Path) -> None:
    """CMakeLists.txt names no source of its own: the library it configures is EDP_CORE_SRCS,
    and a source added to sources.mk reaches it (the archive test below counts the objects)."""
    text = (CORE / "CMakeLists.txt").read_text()
    assert not re.findall(r"\bsrc/\S+\.c\b", text), "CMakeLists.txt lists sources: read sources.mk"
    copy = tmp_path / "firmware"
    shutil.copytree(CORE, copy / "core", ignore=shutil.ignore_patterns("build*"))
    mk = (ROOT / "firmware" / "sources.mk").read_text()
    probe = copy / "core" / "src" / "extra_probe.c"  # (in tmp_path: the copy's own source)
    probe.write_text("int edp_extra_probe(void) { return 1; }\n")
    (copy / "sources.mk").write_text(mk.replace("firmware/core/src/budget.c \\",
                                                "firmware/core/src/budget.c \\\n\tfirmware/core/src/extra_probe.c \\"))
    out = configure_probe(tmp_path, copy / "core",
                          'get_target_property(s edgedp_core SOURCES)\nmessage(STATUS "EDP_SOURCES=${s}")\n')
    listed = re.search(r"EDP_SOURCES=(.*)", out)
    assert listed
    got = sorted(str(Path(s).relative_to(copy / "core")) for s in listed.group(1).split(";"))
    assert got == sorted([*core_sources(), str(probe.relative_to(copy / "core"))])


def test_cmake_project_version_is_the_headers(tmp_path: Path) -> None:
    """The configured project's version is EDP_FIRMWARE_VERSION (options.h), the one version."""
    from edgedp import schema as S
    out = configure_probe(tmp_path, CORE, f"get_directory_property(v DIRECTORY {CORE} DEFINITION PROJECT_VERSION)\n"
                                          'message(STATUS "EDP_VERSION=${v}")\n')
    assert f"EDP_VERSION={S.FIRMWARE_VERSION}\n" in out


def test_library_json_selects_exactly_the_core_sources() -> None:
    build = json.loads((CORE / "library.json").read_text())["build"]
    src = CORE / build["srcDir"]
    assert (CORE / build["includeDir"] / "edgedp" / "device.h").is_file()
    selected: set[str] = set()
    for rule in build["srcFilter"]:
        sign, pattern = rule[0], rule[2:-1]
        hits = {str(p.relative_to(src)) for p in src.rglob("*.c")
                if fnmatch.fnmatch(str(p.relative_to(src)), pattern)}
        selected = selected | hits if sign == "+" else selected - hits
    assert sorted(f"{build['srcDir']}/{s}" for s in selected) == core_sources()
    assert "-ffp-contract=off" in build["flags"]


def test_the_public_api_is_a_few_headers() -> None:
    """include/edgedp holds the API alone; its headers include only each other (the internal
    headers are in src/, beside the sources), and edgedp.h names every one."""
    inc = CORE / "include" / "edgedp"
    assert {p.name for p in inc.iterdir()} == PUBLIC
    umbrella = (inc / "edgedp.h").read_text()
    for h in sorted(PUBLIC):
        for name in re.findall(r'#include "([^"]+)"', (inc / h).read_text()):
            assert name.startswith("edgedp/") and name[len("edgedp/"):] in PUBLIC, f"{h} includes {name}"
        assert h == "edgedp.h" or f'#include "edgedp/{h}"' in umbrella, f"edgedp.h does not include {h}"


@pytest.mark.parametrize("defs", [[], ["-DEDP_TEST_BUILD=1", "-DEDP_MAX_CLASSES=256"]])
def test_an_application_builds_on_the_public_headers_alone(tmp_path: Path, defs: list[str]) -> None:
    """The application allocates the device statically from the API (EDP_DEVICE_SIZE, opaque) and
    calls it, with -I of include/ only; the core, built with the same options, checks that its
    state fits that storage (device.c), on the host and on the Cortex-M4."""
    app = tmp_path / "app.c"
    app.write_text('#include "edgedp/edgedp.h"\n'
                   "static edp_device_t device;\n"
                   "void app(const edp_port_t *port, const edp_model_t *model)\n"
                   "{ edp_device_init(&device, port); edp_device_set_model(&device, model); }\n")
    run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", *defs, f"-I{CORE / 'include'}",
         "-c", str(app), "-o", str(tmp_path / "app.o")], tmp_path)
    for cc in (["gcc"], ["arm-none-eabi-gcc", *ARM_FLAGS]):
        run([*cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", *defs, f"-I{CORE / 'include'}",
             "-c", str(CORE / "src" / "device.c"), "-o", str(tmp_path / "device.o")], tmp_path)


def cmake_build(tmp: Path, *options: str, target: str | None = None) -> Path:
    if shutil.which("cmake") is None:
        pytest.fail("cmake not found: `make setup` installs it")
    out = tmp / "build"
    run(["cmake", "-S", str(ROOT / "tests" / "consumer"), "-B", str(out), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
         *options], tmp)
    run(["cmake", "--build", str(out), "-j", "2", *(["--target", target] if target else [])], tmp)
    return out


def defined_symbols(obj_archive: Path, nm: str) -> dict[str, set[str]]:
    """Source base name (``dlap_armv7m.c``) -> defined global symbols of a static archive."""
    members: dict[str, set[str]] = {}
    current = None
    for line in run([nm, "--defined-only", "-g", str(obj_archive)], obj_archive.parent).splitlines():
        if line.endswith(":"):
            current = line[:-1].removesuffix(".obj").removesuffix(".o")
            members[current] = set()
        elif current and line.split():
            members[current].add(line.split()[-1])
    return members


def test_consumer_links_the_template_port_with_the_host_compiler(tmp_path: Path) -> None:
    out = cmake_build(tmp_path, "-DCMAKE_BUILD_TYPE=Release")
    assert (out / "template_image").is_file()
    app = [c for c in json.loads((out / "compile_commands.json").read_text())
           if "/firmware/core/" not in c["file"]]
    assert {Path(c["file"]).name for c in app} == {"board.c", "main.c", "none.c"}
    for c in app:  # the application and its port see the public headers alone
        assert str(CORE / "include") in c["command"] and str(CORE / "src") not in c["command"], c["command"]
    members = defined_symbols(out / "edgedp" / "libedgedp_core.a", "nm")
    assert len(members) == len(core_sources())  # one object per source, none overwritten
    assert {"edp_dlap_noisy", "edp_dlap_setup"} <= members["dlap_portable.c"] | members["dlap.c"]
    assert "edp_device_rx" in members["device.c"]


def test_core_cross_compiles_as_a_cmake_library(tmp_path: Path) -> None:
    toolchain = tmp_path / "arm.cmake"
    toolchain.write_text(
        "set(CMAKE_SYSTEM_NAME Generic)\nset(CMAKE_SYSTEM_PROCESSOR arm)\n"
        "set(CMAKE_C_COMPILER arm-none-eabi-gcc)\n"
        "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)\n"
        f"set(CMAKE_C_FLAGS_INIT \"{' '.join(ARM_FLAGS)}\")\n")
    out = cmake_build(tmp_path, f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", "-DCMAKE_BUILD_TYPE=Release",
                      target="edgedp_core")
    members = defined_symbols(out / "edgedp" / "libedgedp_core.a", "arm-none-eabi-nm")
    assert "edp_dlap_noisy" in members["dlap_armv7m.c"]  # the Thumb-2 loop, not overwritten
    assert "edp_chacha_block" in members["drbg_armv7m.c"]


def fused_ops(src: Path, tmp: Path, *extra: str) -> int:
    obj = tmp / (src.stem + ".o")
    run(["arm-none-eabi-gcc", *ARM_FLAGS, "-std=gnu11", "-O2", *extra,
         f"-I{CORE / 'include'}", f"-I{CORE / 'src'}", "-c", str(src), "-o", str(obj)], tmp)
    return len(FUSED.findall(run(["arm-none-eabi-objdump", "-d", str(obj)], tmp)))


@pytest.mark.parametrize("module", ["model", "mech", "device"])
def test_no_fused_multiply_add_under_gnu_c(module: str, tmp_path: Path) -> None:
    """-std=gnu11 (GCC's default, and many IDEs') turns contraction on; the source pins it off."""
    assert fused_ops(CORE / "src" / f"{module}.c", tmp_path) == 0


def test_gnu_c_would_fuse_without_the_pin(tmp_path: Path) -> None:
    """The check above can fail: the same kernel shape without fp_contract.h fuses."""
    src = tmp_path / "dot.c"
    src.write_text("float dot(const float *x, const float *w, int n)\n"
                   "{ float s = 0; for (int i = 0; i < n; i++) s = s + x[i] * w[i]; return s; }\n")
    assert fused_ops(src, tmp_path) > 0
    pinned = tmp_path / "dot_pinned.c"
    pinned.write_text('#include "fp_contract.h"\n' + src.read_text())
    assert fused_ops(pinned, tmp_path) == 0


def test_deadline_constants_can_be_overridden(tmp_path: Path) -> None:
    """The release-deadline constants are measured for gcc 12 -O2; another build overrides them
    (-DEDP_DL_...), and the override reaches the compiled bound."""
    def disassembly(*defines: str) -> str:
        obj = tmp_path / f"deadline{len(defines)}.o"
        run(["arm-none-eabi-gcc", *ARM_FLAGS, "-std=c99", "-O2", *defines, f"-I{CORE / 'include'}",
             f"-I{CORE / 'src'}", "-c", str(CORE / "src" / "deadline.c"), "-o", str(obj)], tmp_path)
        return run(["arm-none-eabi-objdump", "-d", str(obj)], tmp_path)

    assert "#4242\t" not in disassembly()
    assert "#4242\t" in disassembly("-DEDP_DL_PER_CLASS=4242u")
