"""PlatformIO build of the stm32f4 image from firmware/sources.mk.

firmware/sources.mk is the one description of what the images are built
from; the top-level Makefile includes it and this script reads it, so
`pio run` compiles the sources `make build/stm32f4/edgedp.elf` compiles, with
the same flags. tests/python/test_board_files.py checks the two against `make -n`.

platformio.ini runs this file twice (PlatformIO's "launch types"); the stage
is told apart by whether PlatformIO's project environment ``projenv`` exists:

* ``pre:`` (before platform-ststm32's builder): selects the sources by setting
  the source filter under ``src_dir = firmware``.
* ``post:`` (after the builder has set its defaults and created the build
  nodes): replaces every compiler, assembler and linker variable -- the
  builder's ``-Os``, ``F_CPU``, board and PLATFORMIO defines, libraries and
  linker script -- with the Makefile's, and makes the size line count every
  section the image puts in flash (``.isr_vector`` and ``.edp_key`` included).
  SCons expands these variables when it runs a command, so the replacement
  applies to every object file and to the link.

Board options: an environment option ``custom_define_<name> = <value>`` sets
``-D<NAME>=<value>`` in place of the image's default (platformio.ini:
``custom_define_edp_console_usart = 3`` for a console on USART3); the same
build with make is ``make EDP_STM32F4_DEFS="... -DEDP_CONSOLE_USART=3"``.

Imported as a module (by the tests) the file only defines the parser and
``stm32f4_build()``; nothing here needs PlatformIO or SCons then.
"""
import glob
import os
import re
from typing import Dict, List, Mapping, Optional, Tuple

SOURCES_MK = os.path.join("firmware", "sources.mk")
DEFINE_PREFIX = "custom_define_"

# What the Makefile's build/stm32f4/edgedp.elf rule is made of, by variable of
# sources.mk. If sources.mk defines EDP_STM32F4_IMAGE_SRCS, that list is used
# instead of the concatenation below.
IMAGE_SRC_LISTS = ("EDP_CORE_SRCS", "EDP_APP_SRCS", "EDP_CORTEXM_SRCS", "EDP_STM32F4_SRCS")

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\?=|\+=|:=|=)\s*(.*)$")
_REF = re.compile(r"\$(?:\(([^()]*)\)|\{([^{}]*)\}|(\$))")


class MakefileSyntaxError(ValueError):
    """sources.mk uses make syntax outside the subset this script understands."""


class MakeVars:
    """The variables of a sources.mk-style file, expanded the way GNU make would.

    Understood: ``NAME = / := / ?= / += value`` lines, ``\\`` continuations,
    ``#`` comments, and ``$(NAME)``, ``${NAME}``, ``$(wildcard ...)``
    references. Anything else raises MakefileSyntaxError. ``overrides`` act like
    command-line variables: the file cannot change them. ``root`` is the
    directory $(wildcard ...) patterns are relative to.
    """

    def __init__(self, text: str, root: str, overrides: Optional[Mapping[str, str]] = None,
                 name: str = SOURCES_MK):
        self.root = root
        self.overrides = dict(overrides or {})
        self._raw: Dict[str, str] = dict(self.overrides)
        self._simple: Dict[str, bool] = {k: True for k in self.overrides}
        self._parse(text, name)

    def _parse(self, text: str, name: str) -> None:
        logical: List[str] = []
        pending = None
        for line in text.splitlines():
            if pending is not None:
                line = pending + " " + line.strip()
                pending = None
            if line.endswith("\\"):
                pending = line[:-1].rstrip()
                continue
            logical.append(line)
        if pending is not None:
            logical.append(pending)
        for line in logical:
            line = line.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            match = _ASSIGN.match(line)
            if not match:
                raise MakefileSyntaxError(f"{name}: unsupported line: {line.strip()!r}")
            var, op, value = match.groups()
            if var in self.overrides:
                continue
            if op == "?=":
                if var not in self._raw:
                    self._raw[var], self._simple[var] = value, False
            elif op == "+=" and var in self._raw:
                if self._simple[var]:
                    value = self.expand(value)
                self._raw[var] = (self._raw[var] + " " + value).strip()
            elif op == ":=":
                self._raw[var], self._simple[var] = self.expand(value), True
            else:
                self._raw[var], self._simple[var] = value, False

    def __contains__(self, var: str) -> bool:
        return var in self._raw

    def get(self, var: str) -> str:
        """The expanded value of var ('' when undefined, as in make)."""
        return self.expand(self._raw.get(var, ""), (var,))

    def words(self, var: str) -> List[str]:
        return self.get(var).split()

    def expand(self, value: str, stack: Tuple[str, ...] = ()) -> str:
        """value with every $(...) reference expanded."""
        def one(match) -> str:
            if match.group(3):
                return "$"
            ref = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
            if ref.startswith("wildcard "):
                found: List[str] = []
                for pattern in self.expand(ref[len("wildcard "):], stack).split():
                    hits = glob.glob(os.path.join(self.root, pattern))
                    found += sorted(os.path.relpath(h, self.root) for h in hits)
                return " ".join(found)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ref):
                raise MakefileSyntaxError(f"unsupported make reference $({ref})")
            if ref in stack:
                raise MakefileSyntaxError(f"recursive make variable {ref}")
            return self.expand(self._raw.get(ref, ""), stack + (ref,))

        return _REF.sub(one, value)


class Stm32f4Build:
    """What the stm32f4 image is compiled from and how (paths relative to the root).

    The Makefile compiles and links in one gcc command, so every flag below
    reaches both steps there; PlatformIO compiles with ``compile_flags`` and
    links with ``link_flags``, which together hold the same flags."""

    def __init__(self, srcs: List[str], cflags: List[str], defines: List[str],
                 includes: List[str], ldflags: List[str], ldscript: str):
        self.srcs = srcs
        self.cflags = cflags          # EDP_ARM_CFLAGS (architecture, language, warnings)
        self.defines = defines        # EDP_STM32F4_DEFS with overrides applied, as -D flags
        self.includes = includes      # -I flags from EDP_INCLUDES
        self.ldflags = ldflags        # EDP_ARM_LDFLAGS
        self.ldscript = ldscript      # EDP_STM32F4_LDSCRIPT

    @property
    def compile_flags(self) -> List[str]:
        return self.cflags + self.defines + self.includes

    @property
    def link_flags(self) -> List[str]:
        return self.cflags + self.ldflags + ["-T", self.ldscript]

    def __repr__(self) -> str:
        return "Stm32f4Build(%s)" % ", ".join(f"{k}={v!r}" for k, v in vars(self).items())


def defines_from_options(options: Mapping[str, object]) -> Dict[str, str]:
    """{MACRO: value} from an environment's custom_define_<macro> options."""
    result = {}
    for option, value in options.items():
        if option.lower().startswith(DEFINE_PREFIX):
            if isinstance(value, (list, tuple)):
                value = " ".join(str(v) for v in value)
            result[option[len(DEFINE_PREFIX):].upper()] = str(value).strip()
    return result


def apply_defines(flags: List[str], defines: Mapping[str, str]) -> List[str]:
    """flags with -DNAME[=value] replaced for every NAME in defines, others appended."""
    out: List[str] = []
    done = set()
    for flag in flags:
        name = flag[2:].split("=", 1)[0] if flag.startswith("-D") else None
        if name in defines:
            out.append(f"-D{name}={defines[name]}")
            done.add(name)
        else:
            out.append(flag)
    out += [f"-D{name}={value}" for name, value in defines.items() if name not in done]
    return out


def stm32f4_build(root: str, defines: Optional[Mapping[str, str]] = None) -> Stm32f4Build:
    """Read firmware/sources.mk under root; defines override EDP_STM32F4_DEFS entries."""
    with open(os.path.join(root, SOURCES_MK), encoding="utf-8") as f:
        mk = MakeVars(f.read(), root)
    required = ("EDP_ARM_CFLAGS", "EDP_ARM_LDFLAGS", "EDP_STM32F4_DEFS", "EDP_STM32F4_LDSCRIPT",
                "EDP_INCLUDES")
    missing = [v for v in required if v not in mk]
    if missing:
        raise MakefileSyntaxError(f"{SOURCES_MK} does not define {', '.join(missing)}")
    if "EDP_STM32F4_IMAGE_SRCS" in mk:
        srcs = mk.words("EDP_STM32F4_IMAGE_SRCS")
    else:
        srcs = [s for var in IMAGE_SRC_LISTS for s in mk.words(var)]
    return Stm32f4Build(
        srcs=srcs,
        cflags=mk.words("EDP_ARM_CFLAGS"),
        defines=apply_defines(mk.words("EDP_STM32F4_DEFS"), dict(defines or {})),
        includes=["-I" + d for d in mk.words("EDP_INCLUDES")],
        ldflags=mk.words("EDP_ARM_LDFLAGS"),
        ldscript=mk.get("EDP_STM32F4_LDSCRIPT").strip(),
    )


def absolute_paths(flags: List[str], root: str) -> List[str]:
    """flags with the paths after -I / -T / -L made absolute (SCons may run elsewhere)."""
    out: List[str] = []
    expect_path = False
    for flag in flags:
        if expect_path:
            out.append(os.path.join(root, flag))
            expect_path = False
        elif flag in ("-I", "-T", "-L"):
            out.append(flag)
            expect_path = True
        elif flag[:2] in ("-I", "-T", "-L") and len(flag) > 2:
            out.append(flag[:2] + os.path.join(root, flag[2:]))
        else:
            out.append(flag)
    return out


def source_filter(build: Stm32f4Build, root: str, src_dir: str) -> str:
    """PlatformIO build_src_filter selecting exactly build.srcs under src_dir."""
    patterns = ["-<*>"]
    for src in build.srcs:
        rel = os.path.relpath(os.path.join(root, src), src_dir)
        if rel.startswith(".."):
            raise MakefileSyntaxError(f"{src} is outside src_dir {src_dir}: set src_dir = firmware")
        patterns.append("+<%s>" % rel.replace(os.sep, "/"))
    return " ".join(patterns)


# --------------------------------------------------------------------------
# PlatformIO / SCons part (runs only when PlatformIO executes this file).


def _pre(env) -> None:
    root = env.subst("$PROJECT_DIR")
    build = stm32f4_build(root, defines_from_options(env.GetProjectOptions(as_dict=True)))
    env.Replace(SRC_FILTER=source_filter(build, root, env.subst("$PROJECT_SRC_DIR")),
                LDSCRIPT_PATH=os.path.join(root, build.ldscript))
    env["EDGEDP_STM32F4_BUILD"] = build


def _post(env, projenv) -> None:
    root = env.subst("$PROJECT_DIR")
    build = env["EDGEDP_STM32F4_BUILD"]
    cflags = absolute_paths(build.cflags, root)
    compile_vars = dict(
        CFLAGS=[], CXXFLAGS=[], CCFLAGS=cflags, CPPFLAGS=[],
        # Include dirs and defines go where PlatformIO's IDE integration looks.
        CPPPATH=[os.path.join(root, flag[2:]) for flag in build.includes],
        CPPDEFINES=[flag[2:] for flag in build.defines],
        # .S goes through $CC with $ASPPFLAGS; .s through $AS, made the compiler driver.
        ASPPFLAGS=cflags, AS="$CC",
        ASFLAGS=cflags + build.defines + absolute_paths(build.includes, root) + ["-c"],
    )
    for e in {id(env): env, id(projenv): projenv}.values():
        e.Replace(**compile_vars)
    env.Replace(
        LINKFLAGS=absolute_paths(build.link_flags, root)
        + ["-Wl,-Map=" + os.path.join(env.subst("$BUILD_DIR"), "edgedp.map")],
        LIBS=[], LIBPATH=[], _LIBDIRFLAGS="", _LIBFLAGS="",
        # firmware/ports/stm32f4/stm32f4.ld: what goes to flash, and what takes RAM.
        SIZEPROGREGEXP=r"^(?:\.isr_vector|\.text|\.data|\.edp_key)\s+(\d+).*",
        SIZEDATAREGEXP=r"^(?:\.data|\.bss)\s+(\d+).*",
    )


def _scons_main() -> None:
    Import("env")  # noqa: F821  (SCons builtin: binds env in this file's globals)
    env = globals()["env"]
    try:
        # projenv exists once the platform builder has created the build nodes: POST stage.
        Import("projenv")  # noqa: F821
    except Exception:
        _pre(env)
        return
    if env.get("EDGEDP_STM32F4_BUILD") is None:
        _pre(env)
    _post(env, globals()["projenv"])


try:
    Import  # noqa: F821,B018  (defined only when SCons runs this file)
except NameError:
    pass
else:
    _scons_main()
