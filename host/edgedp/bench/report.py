"""The tables of docs/benchmarks.md, generated from one ``edgedp bench`` result.

Every table the document holds comes from :func:`sections`: one named section per part of the
run (the targets, the grid, the two sampling loops, the footprint, INFER, the peers, the host's
throughput), each between two markers that name the section, the commit and date of the run
and the command that produced it::

    <!-- BEGIN edgedp bench grid | commit 1a2b3c4d5e6f | 2026-12-07 | `edgedp bench --markdown docs/benchmarks.md` -->
    ...
    <!-- END edgedp bench grid -->

``edgedp bench --markdown FILE`` writes them: into FILE's own markers when FILE has any (the
prose around them is kept; :func:`update`), else as a new file of the sections alone.
:func:`parse` reads the sections back (the tests check the document with it)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

BEGIN = "<!-- BEGIN edgedp bench {name} | commit {commit} | {date} | `{command}` -->"
END = "<!-- END edgedp bench {name} -->"
_BEGIN_RE = re.compile(r"^<!-- BEGIN edgedp bench ([a-z0-9-]+) \| commit (\S+) \| (\S+) \| `(.+)` -->$")
_END_RE = re.compile(r"^<!-- END edgedp bench ([a-z0-9-]+) -->$")
ORDER = ("targets", "grid", "loops", "footprint", "infer", "peers", "e2e")
"""The sections, in the order :func:`sections` gives them (those of parts not run are absent)."""


class ReportError(ValueError):
    """A document whose generated sections are not well formed (an unclosed or repeated marker)."""


@dataclass
class Section:
    name: str
    commit: str
    date: str
    command: str
    body: str

    def text(self) -> str:
        return "\n".join([BEGIN.format(name=self.name, commit=self.commit, date=self.date, command=self.command),
                          self.body, END.format(name=self.name)])


def _n(v: float | None, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def _table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def _grid(result: dict) -> str:
    rows = result["rows"]
    cost = _table(
        ["k", "ε", "DP step (instr.)", "per class", "amortised per class", "naive per class",
         "amortised ÷ naive", "est. cycles", "est. µs at 168 MHz", "keystream bits per class", "H bits",
         "entropy limit per class", "amortised ÷ limit"],
        [[str(r["k"]), f"{r['epsilon']:g}", _n(r["dp_instructions"] or r.get("trace_instructions")),
          _n(r["dp_per_class"], ".1f"), _n(r.get("dp_per_class_amortised"), ".1f"),
          _n(r["naive_per_class"], ".1f"), _n(r.get("dp_over_naive_amortised"), ".3f"),
          _n(r.get("est_cycles")), _n(r.get("est_us_168mhz"), ".1f"), _n(r.get("keystream_bits_per_class"), ".1f"),
          _n(r.get("entropy_bits"), ".1f"), _n(r.get("entropy_limit_per_class"), ".1f"),
          _n(r.get("dp_over_entropy_limit_amortised"), ".2f")] for r in rows])

    def part(r: dict, name: str) -> str:
        return _n((r.get("breakdown") or {}).get(name), ".1f")

    split = _table(
        ["k", "ε", "ChaCha12", "DRBG", "sampler", "mechanism", "timer", "other", "whole QUERY frame",
         "framing per class", "QUERY round trips/s"],
        [[str(r["k"]), f"{r['epsilon']:g}", *(part(r, p) for p in ("chacha", "drbg", "sampler", "mechanism",
                                                                  "timer", "other")),
          _n(r.get("frame_instructions")),
          _n(r["framing_instructions"] / r["k"] if r.get("framing_instructions") is not None else None, ",.1f"),
          _n(r["queries_per_second"], ".1f")] for r in rows])
    deadline = _table(
        ["k", "ε", "release deadline", "longest window", "optimum (est.)", "deadline ÷ optimum",
         "first query's deadline", "its window"],
        [[str(r["k"]), f"{r['epsilon']:g}", _n(r.get("deadline_instructions")),
          _n(r.get("max_work_instructions")), _n(r.get("optimum_instructions")),
          _n(r.get("deadline_over_optimum"), ".2f"), _n(r.get("first_deadline_instructions")),
          _n(r.get("first_work_instructions"))] for r in rows])
    queries = ", ".join(f"{n} for k = {k}" for k, n in sorted({r["k"]: r["queries"] for r in rows}.items()))
    notes = [f"Measured queries per point (after one warm-up): {queries}." if rows else "No point measured."]
    conv = [r["conversion_max_error"] for r in rows if r.get("conversion_max_error") is not None]
    if conv:
        notes.append(f"Ticks ÷ 1.344 against the Unicorn trace, every query and NAIVE run: at most "
                     f"{max(conv):.2f} instructions apart.")
    per_bit = next((r["drbg_instructions_per_bit"] for r in rows if r.get("drbg_instructions_per_bit")), None)
    if per_bit:
        notes.append(f"DRBG: {per_bit:.3f} instructions per keystream bit (one batch in Unicorn).")
    h = result.get("host")
    if h:
        notes.append(f"Host reference: {h['reference_samples_per_second']:,.0f} samples/s bit-exact, "
                     f"{h['fast_samples_per_second']:,.0f} samples/s vectorised (ε = {h['epsilon']:g}, "
                     f"k = {h['k']}).")
    if result.get("partial"):
        from .run import partial_note
        notes.append(partial_note(result))
    return "\n\n".join([cost, split, deadline, " ".join(notes)])


def _targets(result: dict) -> str:
    from .run import target_results
    rows = [[f"`{name}`", text, "yes" if ok else "**no**"] for name, text, ok in target_results(result)]
    return _table(["target", "measured", "met"], rows) if rows else "No target evaluated in this run."


def _loops(result: dict) -> str:
    rows = [r for r in result["rows"] if r.get("asm_loop_reduction") is not None]
    table = _table(["k", "ε", "Thumb-2 loop, amortised per class", "C loop, amortised per class",
                    "Thumb-2 below C"],
                   [[str(r["k"]), f"{r['epsilon']:g}", f"{r['dp_per_class_amortised']:.1f}",
                     f"{r['c_loop_per_class_amortised']:.1f}", f"{100 * r['asm_loop_reduction']:.1f} %"]
                    for r in rows])
    t = result["targets"].get("thumb2_loop_at_least_10pct_below_c")
    if not t:
        return table
    return table + (f"\n\nAt the grid's worst point (k = {t['at']['k']}, ε = {t['at']['epsilon']:g}, the highest "
                    f"C-loop figure) the Thumb-2 loop is {100 * t['reduction']:.1f} % below the C loop "
                    f"({t['thumb2_per_class']:.1f} against {t['c_per_class']:.1f}); the least over the grid is "
                    f"{100 * t['least_reduction']:.1f} %. Same queries, same keystream, the same answers bit for "
                    f"bit ({result['trace']['elf']} and {result['trace']['c_loop_elf']}).")


def _footprint(result: dict) -> str:
    fp = result.get("footprint") or {}
    if "modules" not in fp:
        return f"Footprint not measured: {fp.get('error', 'not run')}."
    dp = set(fp["dp_modules"])
    state = ", ".join(f"`{name}` {size:,} B" for name, size in fp["dp_ram_state"].items())
    table = _table(["module", "text", "data", "bss", "linked flash"],
                   [[f"**{m['module']}**" if m["module"] in dp else m["module"], f"{m['text']:,}", str(m["data"]),
                     str(m["bss"]), f"{m['linked_flash']:,}"] for m in fp["modules"]])
    return table + (f"\n\nDP core ({', '.join(fp['dp_modules'])}): {fp['dp_flash_linked']:,} B linked in "
                    f"`{fp['image']}`, {fp['dp_closure_flash']:,} B with everything its entry points call "
                    f"(the soft-double runtime and the deadline set-up). RAM: {state} = {sum(fp['dp_ram_state'].values()):,} B "
                    f"of state, and the deeper stack of the step ({fp['dp_stack']:,} B: "
                    f"{' → '.join(fp['dp_stack_path'])}) and the set-up ({fp['setup_stack']:,} B: "
                    f"{' → '.join(fp['setup_stack_path'])}): {fp['dp_ram']:,} B, plus a {fp['table_bytes']:,} B "
                    f"table per configuration.")


def _infer(result: dict) -> str:
    from .infer import markdown
    return markdown(result["infer"])


def _peers(result: dict) -> str:
    from .peers import markdown
    return markdown(result["peers"])


def _e2e(result: dict) -> str:
    from .e2e import markdown
    res = result["e2e"]
    return markdown(res) + (f"\n\n{res['rows']} rows of k = {res['k']}, {res['mode'].upper()}, the API and the CLI "
                            f"in turns on one session; each rate the best of its runs on this machine (wall-clock: "
                            f"it follows the host's load).")


_RENDER: dict[str, tuple[Callable[[dict], bool], Callable[[dict], str]]] = {
    "targets": (lambda r: True, _targets),
    "grid": (lambda r: True, _grid),
    "loops": (lambda r: any(row.get("asm_loop_reduction") is not None for row in r["rows"]), _loops),
    "footprint": (lambda r: "footprint" in r, _footprint),
    "infer": (lambda r: "infer" in r, _infer),
    "peers": (lambda r: "peers" in r, _peers),
    "e2e": (lambda r: "e2e" in r, _e2e),
}


def sections(result: dict, command: str) -> list[Section]:
    """The document's sections that this run produced, each with its commit, date and command."""
    date = result["date"][:10]
    out = []
    for name in ORDER:
        present, render = _RENDER[name]
        if present(result):
            out.append(Section(name, result["commit"], date, command, render(result)))
    return out


def parse(text: str) -> dict[str, Section]:
    """The generated sections of a document by name; ReportError on an END without its BEGIN, a
    BEGIN without its END or a section named twice."""
    out: dict[str, Section] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _BEGIN_RE.match(lines[i])
        if _END_RE.match(lines[i]):
            raise ReportError(f"line {i + 1}: {lines[i]!r} closes no section")
        if m:
            name = m.group(1)
            if name in out:
                raise ReportError(f"line {i + 1}: section {name!r} appears twice")
            end = next((j for j in range(i + 1, len(lines)) if _END_RE.match(lines[j]) or _BEGIN_RE.match(lines[j])),
                       None)
            closing = _END_RE.match(lines[end]) if end is not None else None
            if end is None or closing is None or closing.group(1) != name:
                raise ReportError(f"line {i + 1}: section {name!r} has no {END.format(name=name)!r} before the next "
                                  "marker")
            out[name] = Section(name, m.group(2), m.group(3), m.group(4), "\n".join(lines[i + 1:end]))
            i = end
        i += 1
    return out


def update(text: str, new: list[Section]) -> tuple[str, list[str], list[str]]:
    """text with each of its generated sections replaced by the one of the same name in ``new``;
    returns the text, the names of ``new`` it had no place for and the names of its sections
    that ``new`` did not have (kept as they were, with their own commit)."""
    old = parse(text)
    by_name = {s.name: s for s in new}
    out: list[str] = []
    skip = None
    for line in text.splitlines():
        if skip is not None:
            if _END_RE.match(line):
                skip = None
            continue
        m = _BEGIN_RE.match(line)
        if m and m.group(1) in by_name:
            out.append(by_name[m.group(1)].text())
            skip = m.group(1)
            continue
        out.append(line)
    return ("\n".join(out) + "\n", [s.name for s in new if s.name not in old],
            [name for name in old if name not in by_name])


def tables(body: str) -> list[list[list[str]]]:
    """The markdown tables of a section: each a list of rows of stripped cells, the header first
    and the |---| line left out; ReportError on a table whose rows differ in width or that lacks
    its |---| line."""
    out: list[list[list[str]]] = []
    block: list[str] = []
    for line in body.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in block]
            if len(cells) < 2 or not all(set(c) <= set("-:") and c for c in cells[1]):
                raise ReportError(f"a table without its |---| line: {block[0]!r}")
            if len({len(r) for r in cells}) != 1:
                raise ReportError(f"a table whose rows differ in width: {block[0]!r}")
            out.append([cells[0], *cells[2:]])
            block = []
    return out
