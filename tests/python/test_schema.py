"""One wire schema: edgedp/schema.py is generated from the C headers and docs/protocol.md agrees."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from edgedp import schema as S
from edgedp import schema_gen
from edgedp.device.errors import MEANING
from edgedp.mech import modes

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "firmware" / "core"
DOC = (ROOT / "docs" / "protocol.md").read_text()


def test_generated_module_matches_the_headers() -> None:
    """Fails on any drift: a header changed without `python -m edgedp.schema_gen` (or schema.py edited)."""
    assert schema_gen.main(["--check"]) == 0, "run: python -m edgedp.schema_gen"
    assert S.__file__ and Path(S.__file__).read_text() == schema_gen.render(schema_gen.parse())


@pytest.fixture()
def headers(tmp_path: Path) -> Path:
    """A copy of the core's headers (firmware/core/include/edgedp and src) to edit."""
    for h in schema_gen.HEADERS:
        src = schema_gen.header_path(CORE, h)
        dst = tmp_path / src.relative_to(CORE)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_a_header_change_shows_as_drift(headers: Path) -> None:
    _edit(headers / "src" / "proto.h", "EDP_T_CHALLENGE = 0x24,", "EDP_T_CHALLENGE = 0x25,")
    _edit(headers / "include" / "edgedp" / "error.h", "EDP_ERR_TIMING    = -13,", "EDP_ERR_TIMING    = -13,\n    EDP_ERR_NEW = -14,")
    _edit(headers / "src" / "dlap.h", "#define EDP_DLAP_CAP_BITS         69", "#define EDP_DLAP_CAP_BITS         70")
    text = schema_gen.render(schema_gen.parse(headers))
    assert text != schema_gen.render(schema_gen.parse())
    assert "    CHALLENGE = 0x25" in text and "    ERR_NEW = 14" in text and "DLAP_CAP_BITS = 70" in text


def test_a_layout_must_add_up_to_its_size(headers: Path) -> None:
    _edit(headers / "src" / "proto.h", "#define EDP_CONFIG_PAYLOAD 36u", "#define EDP_CONFIG_PAYLOAD 35u")
    with pytest.raises(schema_gen.SchemaError, match="EDP_CONFIG_PAYLOAD adds up to 36 bytes"):
        schema_gen.parse(headers)
    _edit(headers / "src" / "proto.h", "#define EDP_CONFIG_PAYLOAD 35u /* layout: eps_micro u32",
          "#define EDP_CONFIG_PAYLOAD 36u /* layout: eps_micro u31")
    with pytest.raises(schema_gen.SchemaError, match="bad layout field"):
        schema_gen.parse(headers)


def test_values_the_host_uses() -> None:
    """Spot checks against values the firmware has always had on the wire."""
    assert (S.FrameType.PING, S.FrameType.CHALLENGE, S.FrameType.RESPONSE) == (0x01, 0x24, 0x80)
    assert (S.ErrorCode.ERR_CRC, S.ErrorCode.ERR_TIMING) == (1, 13)
    assert S.CHALLENGE_BODY_FMT.size == S.AUTH_NONCE + S.AUTH_COUNTER + S.AUTH_TAG == 56
    assert S.FRAME_MAX == S.FRAME_OVERHEAD + S.QUERY_HEAD + S.VALUE_BYTES * S.MAX_CLASSES == 4120
    assert S.AUTH_DOMAIN_ADMIN == b"EDP2" and S.AUTH_DOMAIN_CHALLENGE == b"EDPC"
    assert [str(modes.Mode(m)) for m in S.OutputMode][::2] == ["full", "label", "round:0"]
    assert S.DLAP_Z_LIMIT == 2.0 ** 31 - 1 - 2.0 ** 24 and S.DLAP_MIN_TAIL == 2.0 ** -20


def test_every_error_code_has_a_meaning() -> None:
    assert set(MEANING) == set(S.ErrorCode)


def _table(heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first table after a markdown heading."""
    part = DOC.split(heading, 1)[1]
    rows = []
    for line in part.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not set(line) <= set("|-: "):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows[1:]


def test_docs_error_table_is_the_schema() -> None:
    rows = {(int(r[0]), r[1].strip("`")) for r in _table("## Error codes")}
    assert rows == {(int(c), c.name) for c in S.ErrorCode}


def test_docs_frame_table_is_the_schema() -> None:
    rows = {(int(r[0], 16), r[1]) for r in _table("## Frame types")}
    framing = {S.FrameType.ERROR, S.FrameType.RESPONSE}   # described in "Framing"
    assert rows == {(int(t), t.name) for t in S.FrameType if t not in framing}
    assert f"type `0x{S.FrameType.ERROR:02X}` (ERROR)" in DOC and f"`request | 0x{S.FrameType.RESPONSE:02x}`" in DOC


def test_docs_enumerations_and_sizes_are_the_schema() -> None:
    assert ", ".join(f"{int(m)} {m.name}" for m in S.OutputMode) in " ".join(DOC.split()).replace(" (`arg` = K, 1..32)", "") \
        .replace(" (`arg` = decimals, 0..6)", "")
    states = " ".join(DOC.split("`store`: state found at boot —", 1)[1].split())
    for st in S.StoreState:
        assert f"{int(st)} {st.name.lower()}" in states
    assert f"8 + 16 + 4·{S.MAX_CLASSES} = {S.FRAME_MAX:,} bytes" in DOC
    assert f"up to {S.PING_MAX} bytes" in DOC and f"count u16 (≤{S.SAMPLE_MAX})" in DOC


_PAIR = re.compile(r"\b(\w+) (u8|u16|u32|u64|i8|i16|i32|f32)(?:\[(\d+)\])?(?![\w\[])")


def test_docs_state_every_layout() -> None:
    """Each layout of the schema appears in docs/protocol.md as consecutive `name type` fields."""
    blocks = [[(n, t if not c else f"{t}[{c}]") for n, t, c in _PAIR.findall(b)] for b in re.split(r"\n\s*\n", DOC)]
    for c in schema_gen.parse().constants.values():
        if c.layout is None:
            continue
        want = [(f.name, f.ctype) for f in c.layout]
        found = any(b[i:i + len(want)] == want for b in blocks for i in range(len(b)))
        assert found, f"docs/protocol.md does not state {c.name}: {' | '.join(f'{n} {t}' for n, t in want)}"
