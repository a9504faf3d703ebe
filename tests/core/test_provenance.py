"""Provenance as stored and as shown: the JSON keeps only what applies, a newer choir's keys are
left out when read, and each kind of writer reads as one line."""

from __future__ import annotations

import pytest

from choir.core.memory.knowledge.provenance import UNKNOWN, Provenance, operator, provenance_of

SESSION = Provenance(
    agent="ada", session_id="s-1", rev=41, call_id="call_7", tool="choir.memory.upsert", user="ops"
)


@pytest.mark.parametrize(
    ("provenance", "line"),
    [
        (SESSION, "agent ada, session s-1, with user ops, tool call call_7 after rev 41"),
        (Provenance(agent="ada", session_id="s-1"), "agent ada, session s-1"),
        (operator("choirctl"), "operator via choirctl"),
        (Provenance(), UNKNOWN),
    ],
)
def test_each_writer_reads_as_one_line(provenance: Provenance, line: str) -> None:
    assert provenance.describe() == line


def test_stored_json_round_trips_with_only_what_applies() -> None:
    assert operator("choir tui").as_json() == {"by": "choir tui"}
    assert provenance_of(SESSION.as_json()) == SESSION
    assert provenance_of(SESSION.as_json() | {"from_the_future": 1}) == SESSION


@pytest.mark.parametrize("stored", [None, {}])
def test_an_item_from_before_provenance_has_none(stored: dict[str, object] | None) -> None:
    assert provenance_of(stored) is None
