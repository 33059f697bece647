"""Checks of the files for real boards and Renode, which cannot run here.

- platformio.ini: `pio project config` accepts it, every option is one
  PlatformIO knows, and the build it describes (firmware/ports/stm32f4/
  pio_build.py reading firmware/sources.mk) is the Makefile's: same sources,
  same flags, compared with what `make -n` would run.
- renode/*.robot and tests/robot/*.robot: Robot Framework's own parser
  (robot.api.get_model) reports no error, and every keyword the suites call
  exists (Renode's keywords as listed from its sources, Robot's standard
  libraries, the edgedp keyword library, or the suite's own keywords); a
  `robot --dryrun` of the Renode suite against stand-ins with the signatures
  of Renode's C# keywords checks argument names and counts.
- renode/*.repl / *.resc: the references between the files and to the build,
  a self-contained platform (nothing fetched at load), Renode's own models
  under their 1.16 names (no Python peripheral), the repl's indentation rule,
  and the .resc read hooks run the way Renode runs them.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIO_SCRIPT = ROOT / "firmware" / "ports" / "stm32f4" / "pio_build.py"
STM32F4_ELF = "build/stm32f4/edgedp.elf"


def load_pio_build():
    spec = importlib.util.spec_from_file_location("edgedp_pio_build", PIO_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------
# Robot Framework suites


def robot_files() -> list[Path]:
    return sorted((ROOT / "renode").glob("*.robot")) + sorted((ROOT / "tests" / "robot").glob("*.robot"))


def model_errors(path: Path) -> list[str]:
    from robot.api import get_model
    from robot.api.parsing import ModelVisitor

    errors: list[str] = []

    class Collect(ModelVisitor):
        def generic_visit(self, node):
            for err in getattr(node, "errors", ()) or ():
                errors.append(f"{type(node).__name__} line {getattr(node, 'lineno', '?')}: {err}")
            err = getattr(node, "error", None)
            if err:
                errors.append(f"{type(node).__name__} line {getattr(node, 'lineno', '?')}: {err}")
            super().generic_visit(node)

    Collect().visit(get_model(str(path)))
    return errors


def test_robot_suites_exist():
    names = {p.relative_to(ROOT).as_posix() for p in robot_files()}
    assert "renode/edgedp.robot" in names
    assert any(n.startswith("tests/robot/") for n in names)


@pytest.mark.parametrize("path", robot_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_robot_suite_parses_without_errors(path):
    assert model_errors(path) == []


# Keywords Renode adds for `renode-test` suites, from renode/renode:
# src/Renode/RobotFrameworkEngine/RenodeKeywords.cs and UartKeywords.cs (C#
# methods marked [RobotFrameworkKeyword]) and renode-keywords.robot
# (Setup, Teardown, Test Teardown), the resource ${RENODEKEYWORDS} points to.
RENODE_KEYWORDS = {
    "setup", "teardown", "test teardown",
    "reset emulation", "start emulation", "execute command", "execute script", "execute python",
    "create terminal tester", "wait for line on uart", "wait for lines on uart",
    "wait for prompt on uart", "wait for next line on uart", "wait for bytes on uart",
    "write line to uart", "write to uart", "write char on uart", "send key to uart",
    "test if uart is idle", "should not be on uart", "set default uart timeout",
    "create log tester", "wait for log entry",
}


def _norm(name: str) -> str:
    return re.sub(r"[\s_]+", " ", name).strip().lower()


def library_keywords(name: str) -> set[str]:
    from robot.libdoc import LibraryDocumentation

    return {_norm(kw.name) for kw in LibraryDocumentation(name).keywords}


def suite_keyword_calls(path: Path) -> tuple[set[str], set[str]]:
    """(keywords called, keywords defined) in a suite file."""
    from robot.api import get_model
    from robot.api.parsing import ModelVisitor

    called: set[str] = set()
    defined: set[str] = set()

    class Collect(ModelVisitor):
        def visit_KeywordCall(self, node):
            called.add(_norm(node.keyword))

        def visit_Keyword(self, node):
            defined.add(_norm(node.name))
            self.generic_visit(node)

        def visit_SuiteSetup(self, node):
            called.add(_norm(node.name))

        visit_SuiteTeardown = visit_TestSetup = visit_TestTeardown = visit_SuiteSetup

    Collect().visit(get_model(str(path)))
    return called, defined


def test_renode_suite_calls_only_known_keywords():
    pytest.importorskip("robot_keywords")
    path = ROOT / "renode" / "edgedp.robot"
    called, defined = suite_keyword_calls(path)
    known = set(RENODE_KEYWORDS) | defined
    for lib in ("BuiltIn", "OperatingSystem", "String", "Collections", "Process",
                "robot_keywords.EdgedpKeywords"):
        known |= library_keywords(lib)
    assert sorted(called - known) == []


def test_qemu_suite_calls_only_known_keywords():
    pytest.importorskip("robot_keywords")
    for path in sorted((ROOT / "tests" / "robot").glob("*.robot")):
        called, defined = suite_keyword_calls(path)
        known = defined | library_keywords("BuiltIn") | library_keywords("OperatingSystem")
        known |= library_keywords("robot_keywords.EdgedpKeywords")
        assert sorted(called - known) == [], path


# ---------------------------------------------------------------------------
# Renode platform and script


def repl_entries(text: str) -> dict[str, str]:
    """name -> type of each peripheral declared in a .repl (`name: Type @ ...`)."""
    return dict(re.findall(r"^(\w+): ([\w.]+) @", text, re.M))


def resc_read_hooks(text: str) -> dict[str, str]:
    """peripheral -> Python script of each `sysbus SetHookAfterPeripheralRead` in a .resc."""
    return dict(re.findall(r'^sysbus SetHookAfterPeripheralRead sysbus\.(\w+) "([^"]*)"$', text, re.M))


def run_read_hook(script: str, offset: int, value: int) -> int:
    """The hook the way BusPeripheralsHooksPythonEngine runs it: `value` and `offset` set
    in the scope, `value` read back (Renode then casts it to the access width)."""
    scope = {"value": value, "offset": offset}
    exec(compile(script, "hook", "exec"), scope)
    return scope["value"] & 0xFFFFFFFF


def test_renode_files_reference_each_other():
    repl = (ROOT / "renode" / "edgedp-stm32f4.repl").read_text()
    resc = (ROOT / "renode" / "edgedp.resc").read_text()
    assert re.search(r"^dwt: Miscellaneous\.DWT @ sysbus 0xE0001000\n\s+frequency: 168000000", repl, re.M)
    assert "machine LoadPlatformDescription $ORIGIN/edgedp-stm32f4.repl" in resc
    assert "$elf?=$ORIGIN/../" + STM32F4_ELF in resc
    assert re.search(r"^emulation CreateServerSocketTerminal \$port \"(\w+)\" false$", resc, re.M)
    term = re.search(r'CreateServerSocketTerminal \$port "(\w+)"', resc).group(1)
    assert f"connector Connect sysbus.usart2 {term}" in resc
    assert re.search(r"^bkpsram: Memory\.MappedMemory @ sysbus 0x40024000$", repl, re.M)


def test_renode_platform_is_self_contained():
    """No `using` of Renode's platforms (platforms/cpus/stm32f4.repl runs `ApplySVD @https://...`
    at load), no URL, no ApplySVD: the platform loads offline."""
    repl = (ROOT / "renode" / "edgedp-stm32f4.repl").read_text()
    code = "\n".join(line for line in repl.splitlines() if not line.lstrip().startswith("//"))
    assert not re.search(r"^\s*using\b", code, re.M)
    assert "ApplySVD" not in code and "http" not in code


# The models the firmware needs, as Renode 1.16 names them (renode-infrastructure).
RENODE_MODELS = {
    "flash": "Memory.MappedMemory", "sram": "Memory.MappedMemory", "bkpsram": "Memory.MappedMemory",
    "flash_controller": "MTD.STM32F4_FlashController", "nvic": "IRQControllers.NVIC",
    "cpu": "CPU.CortexM", "dwt": "Miscellaneous.DWT", "usart2": "UART.STM32_UART",
    "usart3": "UART.STM32_UART", "rcc": "Miscellaneous.STM32F4_RCC", "rtc": "Timers.STM32F4_RTC",
    "pwr": "Miscellaneous.STM32_PWR", "rng": "Miscellaneous.STM32F4_RNG",
    "iwdg": "Timers.STM32_IndependentWatchdog", "gpioPortA": "GPIOPort.STM32_GPIOPort",
    "gpioPortD": "GPIOPort.STM32_GPIOPort",
}


def test_renode_platform_uses_renode_models_only():
    repl = (ROOT / "renode" / "edgedp-stm32f4.repl").read_text()
    entries = repl_entries(repl)
    for name, model in RENODE_MODELS.items():
        assert entries.get(name) == model, name
    assert not any(t.startswith("Python.") for t in entries.values())  # no PythonPeripheral
    assert "script:" not in repl


def test_renode_read_hooks_set_what_the_firmware_waits_for():
    """PWR_CSR.BRR reads 1 (STM32_PWR keeps it as a tag reading 0); RTC_CR.BYPSHAD reads 0
    (STM32F4_RTC reports it set); every other register reads what the model returns."""
    hooks = resc_read_hooks((ROOT / "renode" / "edgedp.resc").read_text())
    assert sorted(hooks) == ["pwr", "rtc"]
    assert run_read_hook(hooks["pwr"], 0x04, 0x4000) == 0x4008          # VOSRDY kept, BRR set
    assert run_read_hook(hooks["pwr"], 0x04, 0x4208) == 0x4208
    assert run_read_hook(hooks["pwr"], 0x00, 0x4100) == 0x4100          # PWR_CR untouched
    assert run_read_hook(hooks["rtc"], 0x08, 0x60) == 0x40              # BYPSHAD cleared, FMT kept
    assert run_read_hook(hooks["rtc"], 0x0C, 0x37) == 0x37              # ISR untouched
    for offset in (0x00, 0x04, 0x10, 0x50):
        assert run_read_hook(hooks["rtc"], offset, 0x20) == 0x20


def test_renode_install_instructions_name_current_packages():
    """The portable package of Renode's README (`renode-latest.linux-portable.tar.gz`), not the
    older `-dotnet` name; the Robot Framework pin of renode-test in Renode 1.16 (6.1)."""
    from edgedp.device.targets import renode as renode_target

    texts = {"README.md": (ROOT / "README.md").read_text(),
             "renode/README.md": (ROOT / "renode" / "README.md").read_text(),
             "targets/renode.py": renode_target.INSTALL_HINT}
    for name, text in texts.items():
        assert "linux-portable-dotnet" not in text, name
    assert "renode-latest.linux-portable.tar.gz" in renode_target.INSTALL_HINT
    assert "renode-latest.linux-portable.tar.gz" in texts["renode/README.md"]
    assert "6.0.2" not in texts["renode/README.md"] and "robotframework==6.1" in texts["renode/README.md"]
    assert "STM32_RNG" not in texts["renode/README.md"].replace("STM32F4_RNG", "")


def test_renode_repl_indentation_is_in_fours():
    # Renode's platform description format: indentation is a multiple of four spaces, no tabs.
    for number, line in enumerate((ROOT / "renode" / "edgedp-stm32f4.repl").read_text().splitlines(), 1):
        assert "\t" not in line, number
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 4 == 0, number


def test_console_usart_matches_the_makefile_build():
    pio = load_pio_build()
    build = pio.stm32f4_build(str(ROOT))
    assert "-DEDP_CONSOLE_USART=2" in build.defines  # usart2 in renode/edgedp.resc


# ---------------------------------------------------------------------------
# PlatformIO


def pio_env() -> dict[str, str]:
    """Environment for running pio offline: no telemetry, no upgrade check."""
    return {**os.environ,
            "PLATFORMIO_SETTING_ENABLE_TELEMETRY": "No",
            "PLATFORMIO_DISABLE_UPGRADE_CHECK": "true",
            "PLATFORMIO_SETTING_CHECK_PLATFORMIO_INTERVAL": "3650"}


def pio_executable() -> str:
    exe = Path(sys.executable).with_name("pio")
    if exe.exists():
        return str(exe)
    found = shutil.which("pio")
    if not found:
        pytest.skip("PlatformIO is not installed (pip install platformio)")
    return found


def project_config():
    pytest.importorskip("platformio")
    from platformio.project.config import ProjectConfig

    return ProjectConfig(str(ROOT / "platformio.ini"))


def test_pio_project_config_accepts_platformio_ini(tmp_path):
    r = subprocess.run([pio_executable(), "project", "config", "--json-output"], cwd=ROOT,
                       env={**pio_env(), "PLATFORMIO_CORE_DIR": str(tmp_path / "core")},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    sections = dict(json.loads(r.stdout))
    assert {"env:disco_f407vg", "env:nucleo_f429zi"} <= set(sections)


def test_platformio_options_are_known_to_platformio():
    from platformio.project.options import ProjectOptions

    config = project_config()
    known = {(meta.scope, meta.name) for meta in ProjectOptions.values()}
    for section in config.sections():
        scope = "platformio" if section == "platformio" else "env"
        for option in config.options(section):
            if option.startswith(("custom_", "board_")):
                continue
            assert (scope, option) in known, f"[{section}] {option}"


EXPECTED_ENVS = {
    # env: (board, console USART, HSE bypass)
    "disco_f407vg": ("disco_f407vg", "2", "0"),
    "nucleo_f429zi": ("nucleo_f429zi", "3", "1"),
}


def test_platformio_environments():
    config = project_config()
    assert set(config.envs()) == set(EXPECTED_ENVS)
    for env, (board, usart, bypass) in EXPECTED_ENVS.items():
        opts = dict(config.items(env=env))
        assert opts["platform"] == "ststm32@19.6.0"  # the version these files were checked on
        assert opts["board"] == board
        assert "framework" not in opts  # bare metal: the project's startup and linker script
        assert opts["extra_scripts"] == ["pre:firmware/ports/stm32f4/pio_build.py",
                                          "post:firmware/ports/stm32f4/pio_build.py"]
        assert opts["upload_protocol"] == "stlink"
        assert opts["monitor_speed"] == 115200
        assert str(opts["custom_define_edp_console_usart"]) == usart
        assert str(opts["custom_define_edp_hse_bypass"]) == bypass
    assert Path(config.get("platformio", "src_dir")) == ROOT / "firmware"


def test_pio_check_filter_covers_the_image_and_no_test_port():
    """`pio check` analyses the production image's sources, never a test port (they #error).
    It matches check_src_filters against the project root, not src_dir (CppcheckCheckTool.check:
    get_project_target_files(project_dir, ...))."""
    pytest.importorskip("platformio")
    from platformio.fs import match_src_files

    config = project_config()
    filters = config.get("env", "check_src_filters")
    checked = set(match_src_files(str(ROOT), filters, ["c", "h"]))
    build = load_pio_build().stm32f4_build(str(ROOT))
    assert set(build.srcs) <= checked
    test_ports = [s for s in checked if s.split("/")[2] in ("posix", "qemu", "template") or "ramflash" in s]
    assert test_ports == []


def test_pio_source_filter_selects_the_image_sources():
    pytest.importorskip("platformio")
    from platformio.fs import match_src_files

    pio = load_pio_build()
    build = pio.stm32f4_build(str(ROOT))
    missing = [s for s in build.srcs if not (ROOT / s).exists()]
    if missing:
        pytest.fail(f"sources listed in firmware/sources.mk do not exist: {missing}")
    src_dir = ROOT / "firmware"
    selected = match_src_files(str(src_dir), pio.source_filter(build, str(ROOT), str(src_dir)),
                               ["c", "s", "S"])
    assert sorted(f"firmware/{s}" for s in selected) == sorted(build.srcs)


def test_sources_mk_parser_agrees_with_make():
    """pio_build.py's reading of firmware/sources.mk is GNU make's."""
    pio = load_pio_build()
    text = (ROOT / pio.SOURCES_MK).read_text()
    mk = pio.MakeVars(text, str(ROOT))
    names = re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[:?+]?=", text, re.M)
    assert names
    for name in sorted(set(names)):
        r = subprocess.run(["make", "-s", "--no-print-directory", "-f", pio.SOURCES_MK,
                            "--eval", "__edgedp_print: ; @echo $(%s)" % name, "__edgedp_print"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == mk.words(name), name


def make_dry_run(overrides: list[str]) -> list[list[str]]:
    """The gcc commands `make -n -B build/stm32f4/edgedp.elf` would run."""
    if not (ROOT / "Makefile").exists():
        pytest.fail("no Makefile")
    r = subprocess.run(["make", "-n", "-B", "--no-print-directory", *overrides, STM32F4_ELF],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"make -n {STM32F4_ELF} failed:\n{r.stderr[-2000:]}"
    text = re.sub(r"\\\n", " ", r.stdout)  # recipe lines continued with a backslash
    commands = [shlex.split(line) for line in text.splitlines() if line.strip()]
    return [c for c in commands if c and os.path.basename(c[0]).endswith("gcc")]


def split_gcc_command(argv: list[str]) -> tuple[list[str], list[str], str]:
    """(sources, flags, output) of one gcc command line; -c, -MMD/-MP/-MF, -Wl,-Map dropped."""
    sources, flags, output = [], [], ""
    it = iter(argv[1:])
    for arg in it:
        if arg == "-o":
            output = next(it)
        elif arg in ("-MF", "-MT", "-MQ"):
            next(it)
        elif arg in ("-c", "-MMD", "-MD", "-MP") or arg.startswith("-Wl,-Map="):
            continue
        elif arg.endswith((".c", ".s", ".S")) and not arg.startswith("-"):
            sources.append(arg)
        elif arg.endswith(".o") and not arg.startswith("-"):
            continue
        else:
            flags.append(arg)
    return sources, flags, output


def pair_path_flags(flags: list[str]) -> list[str]:
    """Join '-T path' into '-Tpath' so flags compare as a multiset."""
    out, it = [], iter(flags)
    for f in it:
        out.append(f + next(it) if f in ("-T", "-I", "-L") else f)
    return out


@pytest.mark.parametrize("env", sorted(EXPECTED_ENVS))
def test_platformio_build_equals_makefile_build(env):
    """The sources and flags pio would use for env are those of `make -n` with the same defines."""
    config = project_config()
    pio = load_pio_build()
    build = pio.stm32f4_build(str(ROOT), pio.defines_from_options(dict(config.items(env=env))))
    default = pio.stm32f4_build(str(ROOT))
    overrides = [] if build.defines == default.defines else \
        ["EDP_STM32F4_DEFS=" + " ".join(build.defines)]
    commands = make_dry_run(overrides)
    assert commands, f"make -n {STM32F4_ELF} runs no gcc command"

    make_sources: list[str] = []
    make_flags: list[str] = []
    for argv in commands:
        sources, flags, output = split_gcc_command(argv)
        make_sources += sources
        make_flags += [f for f in pair_path_flags(flags) if f not in make_flags]
    assert sorted(make_sources) == sorted(build.srcs)
    pio_flags: list[str] = []
    for f in pair_path_flags(build.compile_flags + build.link_flags):
        if f not in pio_flags:
            pio_flags.append(f)
    only_make = [f for f in make_flags if f not in pio_flags]
    only_pio = [f for f in pio_flags if f not in make_flags]
    assert (only_make, only_pio) == ([], []), "flags only in make / only in PlatformIO"


# Signatures of the Renode keywords the suite uses, transcribed from the C#
# methods in renode/renode src/Renode/RobotFrameworkEngine (RenodeKeywords.cs,
# UartKeywords.cs): a dry run against them checks keyword names, argument
# counts and argument names without Renode.
RENODE_STUB_LIBRARY = '''
def execute_command(command, machine=None): pass
def execute_script(path): pass
def reset_emulation(): pass
def start_emulation(): pass
def create_terminal_tester(uart, timeout=None, machine=None, endLineOption=None,
                           defaultPauseEmulation=None, defaultWaitForEcho=None,
                           defaultMatchNextLine=None, binaryMode=False): pass
def wait_for_line_on_uart(content, timeout=None, testerId=None, treatAsRegex=False,
                          includeUnfinishedLine=False, pauseEmulation=None, matchNextLine=None): pass
def wait_for_bytes_on_uart(content, timeout=None, testerId=None, treatAsRegex=False,
                           pauseEmulation=None, matchStart=False): pass
def write_line_to_uart(content="", testerId=None, waitForEcho=None, pauseEmulation=None): pass
def test_if_uart_is_idle(timeout, testerId=None, pauseEmulation=None): pass
def stop_remote_server(): pass
'''

RENODE_STUB_RESOURCE = '''*** Settings ***
Library    String
Library    Process
Library    Collections
Library    OperatingSystem
Library    {library}

*** Keywords ***
Setup
    Reset Emulation

Teardown
    Stop Remote Server

Test Teardown
    Reset Emulation
'''


def test_renode_suite_dry_run_against_renode_keyword_signatures(tmp_path):
    pytest.importorskip("robot_keywords")
    library = tmp_path / "renode_stub.py"
    library.write_text(RENODE_STUB_LIBRARY)
    resource = tmp_path / "renode-keywords.robot"
    resource.write_text(RENODE_STUB_RESOURCE.format(library=library))
    r = subprocess.run([sys.executable, "-m", "robot", "--dryrun", "--pythonpath", str(ROOT / "tests" / "robot"),
                        "--output", "NONE", "--log", "NONE",
                        "--report", "NONE", "--variable", f"RENODEKEYWORDS:{resource}",
                        str(ROOT / "renode" / "edgedp.robot")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


class FakeSConsEnv(dict):
    """The slice of a PlatformIO construction environment pio_build.py uses."""

    def __init__(self, options, **values):
        super().__init__(values)
        self.options = options

    def subst(self, text):
        return re.sub(r"\$(\w+)", lambda m: str(self[m.group(1)]), text)

    def Replace(self, **kw):
        self.update(kw)

    def GetProjectOptions(self, as_dict=False):
        assert as_dict
        return self.options


@pytest.mark.parametrize("env_name", sorted(EXPECTED_ENVS))
def test_pio_script_stages_set_what_the_makefile_uses(env_name, tmp_path):
    """_pre and _post (the SCons side) put sources.mk's values in the variables
    SCons builds with, replacing the platform's defaults."""
    config = project_config()
    pio = load_pio_build()
    env = FakeSConsEnv(dict(config.items(env=env_name)), PROJECT_DIR=str(ROOT),
                       PROJECT_SRC_DIR=str(ROOT / "firmware"), BUILD_DIR=str(tmp_path),
                       CCFLAGS=["-Os", "-nostdlib"], CPPDEFINES=[("F_CPU", "168000000L")],
                       LINKFLAGS=["-Os", "-Wl,--relax"], LIBS=["c", "gcc", "m", "stdc++"])
    projenv = FakeSConsEnv({}, **env)
    pio._pre(env)
    pio._post(env, projenv)
    build = env["EDGEDP_STM32F4_BUILD"]
    _, usart, bypass = EXPECTED_ENVS[env_name]
    assert f"EDP_CONSOLE_USART={usart}" in projenv["CPPDEFINES"]
    assert f"EDP_HSE_BYPASS={bypass}" in projenv["CPPDEFINES"]
    for e in (env, projenv):
        assert e["CCFLAGS"] == build.cflags  # no path in EDP_ARM_CFLAGS
        assert e["CPPPATH"] == [str(ROOT / f[2:]) for f in build.includes]
        assert e["CPPDEFINES"] == [f[2:] for f in build.defines]
        assert "-Os" not in e["CCFLAGS"] + e["CFLAGS"] + e["CPPFLAGS"]
    assert env["LINKFLAGS"][:-1] == pio.absolute_paths(build.link_flags, str(ROOT))
    assert env["LINKFLAGS"][-1] == f"-Wl,-Map={tmp_path}/edgedp.map"
    assert env["LIBS"] == [] and env["_LIBFLAGS"] == ""
    assert env["LDSCRIPT_PATH"] == str(ROOT / build.ldscript)
    assert env["SRC_FILTER"] == pio.source_filter(build, str(ROOT), str(ROOT / "firmware"))
