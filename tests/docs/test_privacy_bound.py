"""The implementation's (epsilon, delta) is stated once, in docs/privacy.md section 2; the code
takes its two exponents from edgedp.mech.lattice, and every other file cites privacy.md instead of
restating the numbers (so that docs and sources cannot drift apart again)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOUND = re.compile(r"\((?:ε|eps) \+ k[· ]2\^-(\d+), k[· ]2\^-(\d+)\)")
# Older statements of the bound that must not come back.
STALE = re.compile(r"2⁻⁵⁸|2⁻³⁰|k·2\^-73|2\^-63\)-DP|P\(13 tails\)")


def stated() -> tuple[str, str]:
    text = (ROOT / "docs/privacy.md").read_text()
    m = re.search(r"\*\*" + BOUND.pattern + r"-DP\*\*", text)
    assert m, "docs/privacy.md must state the bound in bold: **(ε + k·2^-A, k·2^-B)-DP**"
    return m.group(1), m.group(2)


def sources() -> list[Path]:
    files = [*ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("*.md"), *ROOT.glob("firmware/**/*.[ch]"),
             *ROOT.glob("host/edgedp/**/*.py")]
    return [f for f in files if f.is_file() and f != ROOT / "docs/privacy.md"]


def test_the_code_uses_the_stated_exponents() -> None:
    from edgedp.analysis.accounting import CAP_DELTA, TABLE_SLACK
    from edgedp.mech.lattice import DELTA_BITS, SLACK_BITS

    assert (str(SLACK_BITS), str(DELTA_BITS)) == stated()
    assert (TABLE_SLACK, CAP_DELTA) == (2.0 ** -SLACK_BITS, 2.0 ** -DELTA_BITS)


def test_no_other_file_restates_the_bound() -> None:
    stated()
    for f in sources():
        text = f.read_text(errors="replace")
        assert not BOUND.search(text), f"{f.relative_to(ROOT)} restates the bound: cite docs/privacy.md §2"
        assert not STALE.search(text), f"{f.relative_to(ROOT)}: stale bound {STALE.search(text).group(0)!r}"


def test_the_stated_delta_is_what_the_tail_cap_is_built_for() -> None:
    """k·2^-66: lattice.CAP_BITS = 69 leaves 4·2^-69 < 2^-66 per coordinate."""
    from edgedp.mech.lattice import CAP_BITS

    _, delta_bits = stated()
    assert 4 * 2.0 ** -CAP_BITS <= 2.0 ** -int(delta_bits)
    header = (ROOT / "firmware/core/src/dlap.h").read_text()
    assert re.search(rf"#define EDP_DLAP_CAP_BITS\s+{CAP_BITS}\b", header)
