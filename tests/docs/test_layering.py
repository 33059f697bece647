"""The layering rule is stated once, as LAYERS in tests/python/test_imports.py; ARCHITECTURE.md
quotes it verbatim (its code block under "The layering rule") and CONTRIBUTING.md points there."""
from __future__ import annotations

import re

from tests.helpers import ROOT
from tests.python.test_imports import layer_table


def quoted(text: str) -> str:
    """The first code block after the heading "## The layering rule"."""
    m = re.search(r"^## The layering rule\n.*?^```\n(.*?)^```$", text, re.S | re.M)
    assert m, 'ARCHITECTURE.md has no code block under "## The layering rule"'
    return m.group(1)


def test_architecture_quotes_the_tests_table() -> None:
    assert quoted((ROOT / "ARCHITECTURE.md").read_text()) == layer_table()


def test_the_quote_check_can_fail() -> None:
    """A doc whose block lost a layer, or states another rule, is caught."""
    table = layer_table()
    assert quoted(f"## The layering rule\n\n```\n{table}```\n") == table
    assert quoted("## The layering rule\n\n```\n" + table.split("\n", 1)[1] + "```\n") != table


def test_contributing_points_to_the_rule_instead_of_restating_it() -> None:
    text = " ".join((ROOT / "CONTRIBUTING.md").read_text().split())
    assert 'ARCHITECTURE.md, "The layering rule"' in text
    assert "←" not in text and "<-" not in text  # no arrow chain of layers
