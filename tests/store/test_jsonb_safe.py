"""Any string survives Postgres: jsonb and text values round-trip exactly (`jsonb_safe`).

Postgres refuses U+0000 in both; the escape must be invisible from the outside — whatever is
written comes back equal, including text that looks like the escape itself.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from choir.store.postgres.jsonb_safe import decode_json, decode_text, encode_json, encode_text
from choir.store.postgres.pool import Connection

TRICKY = [
    "\x00",
    "a\x00b",
    "\x01",
    "\x010",
    "\x011",
    "\x00\x01\x00",
    "\\u0000",  # the six characters, not a NUL
    "\\\x00",
    "\\\\u0000\x00",
    "\u0000\\",
    "é\x00😀\x01",
    "",
]
STRINGS = st.text(
    alphabet=st.characters(exclude_categories=("Cs",)), max_size=30
) | st.sampled_from(TRICKY)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STRINGS, inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("text", TRICKY)
def test_text_round_trips(text: str) -> None:
    assert decode_text(encode_text(text)) == text
    assert "\x00" not in encode_text(text)


@given(JSON)
def test_json_round_trips_without_a_nul_escape_left(value: Any) -> None:
    encoded = encode_json(value)
    assert b"\\u0000" not in encoded.replace(b"\\\\", b"")
    assert decode_json(encoded) == value


def test_json_without_nul_or_soh_is_orjson_unchanged() -> None:
    value = {"a": ["b", 1, None, "\\u0000 as text"], "c\\": "é"}
    assert encode_json(value) == orjson.dumps(value)


@pytest.fixture
async def table(conn: Connection) -> Connection:
    await conn.execute("CREATE TABLE safe (id serial PRIMARY KEY, doc jsonb, note text)")
    return conn


async def test_postgres_takes_and_returns_every_tricky_string(table: Connection) -> None:
    for text in TRICKY:
        doc = {text: [text, {"k": text}]}
        row_id = await table.fetchval(
            "INSERT INTO safe (doc, note) VALUES ($1, $2) RETURNING id", doc, encode_text(text)
        )
        row = await table.fetchrow("SELECT doc, note FROM safe WHERE id = $1", row_id)
        assert row is not None
        assert (row["doc"], decode_text(row["note"])) == (doc, text)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON)
async def test_postgres_round_trips_any_json(table: Connection, value: Any) -> None:
    stored = await table.fetchval("SELECT $1::jsonb", {"v": value})
    assert stored == {"v": value}
