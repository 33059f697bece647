"""Every repository path that tracked text names exists (issue 38 item 5): docs, comments and
strings in C and Python, generated files, the Makefile, platformio.ini, .ci and the Robot files
are read line by line and each path-like token is resolved against `git ls-files`.

A token is a path when
- its first component is a top-level tracked name (``firmware/…``, ``tests/…``, ``Makefile``):
  it resolves from the repository root, or from the citing file's folder;
- it starts with ``../``: it resolves from the citing file's folder and must stay inside the
  repository;
- it contains a ``/`` and ends in an extension the repository uses (``core/src/drbg.c``), or its
  first component names a tracked folder and it ends in ``/`` or has three components
  (``ports/qemu/``, ``arch/armv7m/dlap_armv7m``; not "train/test split"): it resolves as above,
  or is the tail of a tracked path (the abbreviations the docs use: ``mech/chacha.py`` for
  host/edgedp/mech/chacha.py), a source's tail without its extension included;
- it is a bare ``NAME.md``: some tracked file has that name (or it sits beside the citing file).
Also ``NAME §N`` in capitals names a document: NAME.md is tracked. And a dotted ``edgedp.a.b``
names a module of host/edgedp: its longest prefix that is a tracked module exists, and the name
after it is one the module defines or imports at its top level (``edgedp.mech.lattice.MICRO``),
unless the token is a file name (``edgedp.robot``).

Tokens with glob or placeholder characters (``*``, ``{a,b}``, ``<port>``, ``$(VAR)``) and
absolute paths are not paths of the repository. What is exempt, and why, is listed below."""
from __future__ import annotations

import ast
import posixpath
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath

import pytest

from ..helpers import ROOT

NOT_READ = {
    "CHANGELOG.md": "names the paths of every release, old ones on purpose",
    "docs/history/": "the optimisation history: the paths of the commits it describes",
    "tests/docs/test_repo_paths.py": "this test: its examples name missing paths on purpose",
}
OUTPUTS = {
    "build/": "the Makefile's outputs",
    ".pio/": "PlatformIO's build folder",
}
USERS = {
    "firmware/model/mine.c": "the user's model, as `edgedp deploy` writes it in README and docs",
    "firmware/model/dp.c": "README's DP-SGD example writes the user's trained model there",
    "privacy/": "README's privacy gate: the policy files of the user's own repository",
    "privacy-report/": "the report folder of that gate",
    ".github/workflows/privacy.yml": "the user's CI workflow in README's privacy gate",
    "secrets/": "the user's device key (docs/hardware.md's provisioning)",
    "keys/dev.key": "the user's key file in an edgedp.toml example",
    "path/to/": "a placeholder for the user's file",
    "report.md": "written by `edgedp report` into the user's folder",
    "bench.md": "a test's output of `edgedp bench --markdown` in its tmp_path",
    "b.md": "a test's output of `edgedp bench --markdown` in its tmp_path",
}
PLACEHOLDERS = {"NAME", "DIR"}
"""A path component in capitals stands for a name the user picks (firmware/model/NAME.c)."""
FOREIGN = {
    "renode/renode": "Renode's GitHub repository",
    "renode/renode-infrastructure": "the GitHub repository of Renode's peripheral models",
    "platforms/": "Renode's platform descriptions (platforms/cpus/stm32f4.repl)",
    "src/Renode/": "Renode's sources",
    "renode_portable/": "the unpacked Renode portable release",
    "tests/requirements.txt": "Renode's pinned Robot Framework version (its tests/ folder)",
    "tests/run_tests.py": "Renode's test runner",
    "Source/": "CMSIS-DSP's sources (bench/peers.py builds them)",
    "Include/": "CMSIS-DSP's public headers",
    "PrivateInclude/": "CMSIS-DSP's internal headers",
    "hw/": "QEMU's device models (hw/char/stm32f2xx_usart.c)",
    "board/": "OpenOCD's board scripts (board/stm32f4discovery.cfg)",
}

EXEMPT = {**OUTPUTS, **USERS, **FOREIGN}
RUN = re.compile(r"[^\s'\"`()\[\],;=|]+")
NOT_A_PATH = re.compile(r"[*?{}<>$%\\@]|://|\.\.\.|…")
DOC_SECTION = re.compile(r"\b([A-Z][A-Z_]+) §")
OTHER_DOCUMENTS = {"TRM": "ARM's Technical Reference Manual of the Cortex-M4"}
MODULE = re.compile(r"(?<![\w.])edgedp(?:\.[A-Za-z_]\w*)+")
NOT_MODULES = {"edgedp.policy": "the JUnit class names (edgedp.policy, edgedp.policy.audit) of analysis/policy.py's report"}
EXTRA_EXTENSIONS = {".S", ".s", ".sh", ".cfg", ".yml", ".yaml", ".elf", ".bin", ".hex", ".map", ".fish"}
"""Extensions the repository has no file of but a path of it could end in."""


@dataclass(frozen=True)
class Tree:
    files: frozenset[str]
    known: frozenset[str]   # files and their folders
    tails: frozenset[str]   # every component-aligned tail of a known path, and of a file without its suffix
    top: frozenset[str]
    folder_names: frozenset[str]
    extensions: frozenset[str]
    modules: dict[str, str]  # dotted name of each module of host/ -> its file


@cache
def tree() -> Tree:
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"not a git checkout ({r.stderr.strip()})")
    files = frozenset(f for f in r.stdout.split("\0") if f)
    folders = {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    known = files | folders
    tails = set()
    for k in known | {str(PurePosixPath(f).with_suffix("")) for f in files}:
        parts = k.split("/")
        tails.update("/".join(parts[i:]) for i in range(len(parts)))
    modules = {f.removeprefix("host/").removesuffix(".py").removesuffix("/__init__").replace("/", "."): f
               for f in files if f.startswith("host/edgedp/") and f.endswith(".py")}
    return Tree(files, frozenset(known), frozenset(tails), frozenset(k.split("/")[0] for k in files),
                frozenset(PurePosixPath(d).name for d in folders),
                (frozenset(PurePosixPath(f).suffix for f in files) | EXTRA_EXTENSIONS) - {""}, modules)


def normalise(run: str) -> str:
    """The path in a run of non-delimiters: no pytest node id, anchor, line number, sentence
    punctuation, Markdown emphasis, ``target:`` / PlatformIO ``pre:`` prefix or leading ``./``."""
    t = run.split("::")[0].split("#")[0]
    t = re.sub(r"(:\d+)+$", "", t).rstrip(".,:;!?").strip("*_")
    t = re.sub(r"^[a-z][a-z0-9]*:", "", t)
    while t.startswith("./"):
        t = t[2:]
    return t


def exemption(token: str) -> str | None:
    """The entry of EXEMPT or PLACEHOLDERS that covers ``token``, if any."""
    for e in EXEMPT:
        if token.rstrip("/") == e.rstrip("/") or token.startswith(e.rstrip("/") + "/"):
            return e
    return next((c for c in (PurePosixPath(c).stem for c in token.split("/")) if c in PLACEHOLDERS), None)


def missing(token: str, source: str) -> bool:
    """True when ``token`` (a path-like token in ``source``) names a repository path that does not exist."""
    t = tree()
    first = token.split("/")[0]
    beside = posixpath.normpath(posixpath.join(posixpath.dirname(source), token))
    found = token.rstrip("/") in t.known or beside in t.known
    if token.startswith("../"):
        return not found
    if first in t.top:
        return not found
    if "/" in token.strip("/"):
        folder = first in t.folder_names and (token.endswith("/") or token.count("/") >= 2)
        if PurePosixPath(token).suffix in t.extensions or folder:
            return not (found or token.rstrip("/") in t.tails)
        return False
    if token.endswith(".md"):
        return not (found or any(PurePosixPath(f).name == token for f in t.files))
    return False


def missing_module(token: str) -> bool:
    """True when ``edgedp.…`` names no module of host/edgedp, or a name its module does not have."""
    t = tree()
    parts = token.split(".")
    if "." + parts[-1] in t.extensions:
        return False  # a file: edgedp.robot, edgedp.map
    k = next(k for k in range(len(parts), 0, -1) if k == 1 or ".".join(parts[:k]) in t.modules)
    return k < len(parts) and not parts[k].startswith("__") and parts[k] not in top_level_names(t.modules[".".join(parts[:k])])


@cache
def top_level_names(module: str) -> frozenset[str]:
    """The names a module's top level binds: definitions, assignments and imports."""
    names = set()
    for node in ast.parse((ROOT / module).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for tg in targets for n in ast.walk(tg) if isinstance(n, ast.Name))
    return frozenset(names)


def texts() -> Iterator[tuple[str, str]]:
    """(path, text) of every tracked text file that is read (a file with a NUL byte is binary)."""
    for f in sorted(tree().files):
        if not any(f == n or f.startswith(n) for n in NOT_READ):
            data = (ROOT / f).read_bytes()
            if b"\0" not in data:
                yield f, data.decode()


def scan(source: str, text: str, used: set[str] | None = None) -> Iterator[str]:
    """``file:line: token`` for each path in ``text`` that does not exist; adds to ``used`` the
    exemptions that covered a missing one."""
    for n, line in enumerate(text.splitlines(), 1):
        for m in RUN.finditer(line):
            run = m.group(0)
            if ("/" not in run and ".md" not in run) or NOT_A_PATH.search(run) or run.startswith(("/", "~", "-")):
                continue  # a bare top-level name (Makefile) always exists
            token = normalise(run)
            if not token or token.startswith("/") or not missing(token, source):
                continue
            e = exemption(token)
            if e is None:
                yield f"{source}:{n}: {token}"
            elif used is not None:
                used.add(e)
        for m in MODULE.finditer(line):
            jname = next((k for k in NOT_MODULES if m.group(0) == k or m.group(0).startswith(k + ".")), None)
            if jname is not None:
                if used is not None:
                    used.add(jname)
            elif missing_module(m.group(0)):
                yield f"{source}:{n}: {m.group(0)} (no such module or name)"
        for m in DOC_SECTION.finditer(line):
            name = m.group(1)
            if name in OTHER_DOCUMENTS:
                if used is not None:
                    used.add(name)
            elif not any(PurePosixPath(f).name == name + ".md" for f in tree().files):
                yield f"{source}:{n}: {name} § (no {name}.md)"


def test_every_path_the_repository_names_exists() -> None:
    used: set[str] = set()
    bad = [b for source, text in texts() for b in scan(source, text, used)]
    assert not bad, ("paths named in tracked text that do not exist (fix the reference, `git add` a new "
                     "file, or exempt the path in this test with a reason):\n" + "\n".join(bad))
    unused = (EXEMPT.keys() | PLACEHOLDERS | OTHER_DOCUMENTS.keys() | NOT_MODULES.keys()) - used
    assert not unused, f"exemptions no tracked text needs any more (remove them): {sorted(unused)}"


@pytest.mark.parametrize("token, source", [
    ("tests/unit/test_schema.py", "host/edgedp/schema.py"),      # a top-level folder, no such file
    ("firmware/boards/", "README.md"),                           # a folder that moved
    ("cortexm/startup.c", "firmware/ports/stm32f4/board.c"),     # an abbreviation of nothing
    ("ports/host/", "ARCHITECTURE.md"),                          # a tracked folder name, a stale child
    ("../shared/seeds/", "docs/privacy.md"),                     # outside the repository
    ("DESIGN.md", "tests/firmware/test_trace.py"),               # a bare document name
])
def test_a_path_that_does_not_exist_is_found(token: str, source: str) -> None:
    assert missing(token, source)


@pytest.mark.parametrize("token, source", [
    ("firmware/core/src/drbg.c", "ARCHITECTURE.md"),
    ("core/src/drbg.c", "ARCHITECTURE.md"),                      # tail of a tracked path
    ("mech/chacha.py", "ARCHITECTURE.md"),
    ("arch/armv7m/dlap_armv7m", "host/edgedp/bench/footprint.py"),  # a source without .c
    ("privacy.md", "README.md"),
    ("protocol.md", "docs/cli.md"),                              # beside the citing file
    ("../README.md", "docs/cli.md"),
    ("tests/", "CONTRIBUTING.md"),
    ("Makefile", "README.md"),
])
def test_a_path_that_exists_is_accepted(token: str, source: str) -> None:
    assert not missing(token, source)


@pytest.mark.parametrize("line, found", [
    ("see `tests/unit/test_schema.py:12::test_x`.", ["tests/unit/test_schema.py"]),
    ("[link](docs/gone.md#section)", ["docs/gone.md"]),
    ("extra_scripts = pre:firmware/ports/gone.py", ["firmware/ports/gone.py"]),
    ("as DESIGN §3.2 allows", ["DESIGN § (no DESIGN.md)"]),
    ("``edgedp.lattice``'s exponent, edgedp.mech.lattice.NO_SUCH", ["edgedp.lattice (no such module or name)",
                                                                   "edgedp.mech.lattice.NO_SUCH (no such module or name)"]),
    ("edgedp.mech.lattice.MICRO, edgedp.cli.main, `edgedp.robot`, python -m edgedp.schema_gen", []),
    ("built into build/posix/edgedp and firmware/model/NAME.c", []),
    ("`firmware/ports/<port>/`, host/edgedp/{a,b}.py, $(BUILD)/x.c, firmware/core/src/*.c", []),
    ("/usr/include/stdint.h, renode:/some/image.elf and https://github.com/renode/renode/blob/x/y.c", []),
])
def test_tokens_are_read_as_the_text_means_them(line: str, found: list[str]) -> None:
    assert [b.split(": ", 1)[1] for b in scan("README.md", line)] == found
