"""Canonical JSON and the event hash chain: determinism, known answers, tamper detection."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.protocol import (
    GENESIS_HASH,
    CommittedEvent,
    UserMsg,
    canonical_json,
    chain_break,
    chain_hash,
    commit_hash,
    event_json,
    format_ts,
    seal_record,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
TEXT = st.text(st.characters(exclude_categories=["Cs"]))
"""Any text that is valid UTF-8 (no lone surrogates)."""

json_scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | TEXT
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


def test_canonical_json_sorts_keys_without_whitespace_in_utf8():
    payload = {"b": 1, "a": {"d": [1, 2], "c": "é"}}

    assert canonical_json(payload) == '{"a":{"c":"é","d":[1,2]},"b":1}'.encode()


@given(json_objects)
def test_canonical_json_matches_the_stdlib_canonical_form(payload: dict[str, Any]):
    expected = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    assert canonical_json(payload) == expected.encode()


@given(json_objects)
def test_canonical_json_ignores_insertion_order(payload: dict[str, Any]):
    reordered = dict(reversed(list(payload.items())))

    assert canonical_json(reordered) == canonical_json(payload)


def test_chain_hash_known_answer():
    assert chain_hash(GENESIS_HASH, b"{}") == (
        "5508d2b710e64bc470079e1b211d9c58e21011e59d0559e422345dc19d659a75"
    )


def test_commit_hash_known_answer():
    event = {"kind": "user_msg", "text": "hi"}

    digest = commit_hash(GENESIS_HASH, 1, "edge", "2025-01-01T00:00:00.000000Z", event)

    assert digest == "0e741f738e09de6a7f8d9135e626cb732bfc974fe697a364ba8dc6e762398772"


def test_seal_record_matches_the_model_seal():
    event = UserMsg(text="hi", message_id="m1")
    sealed = CommittedEvent.seal(rev=1, lane="edge", ts=T0, hash_prev=GENESIS_HASH, event=event)

    record = seal_record(GENESIS_HASH, 1, "edge", format_ts(T0), event.model_dump(mode="json"))

    assert record == sealed.model_dump(mode="json")
    assert CommittedEvent.model_validate(record) == sealed


def test_parsed_record_recomputes_its_own_hash():
    sealed = CommittedEvent.seal(
        rev=1, lane="edge", ts=T0, hash_prev=GENESIS_HASH, event=UserMsg(text="é ✓")
    )

    parsed = CommittedEvent.model_validate_json(sealed.model_dump_json())

    assert parsed.computed_hash() == sealed.hash


def _chain(count: int) -> list[CommittedEvent]:
    records: list[CommittedEvent] = []
    previous = GENESIS_HASH
    for rev in range(1, count + 1):
        record = CommittedEvent.seal(
            rev=rev,
            lane="edge",
            ts=T0 + timedelta(seconds=rev),
            hash_prev=previous,
            event=UserMsg(text=f"message {rev}"),
        )
        records.append(record)
        previous = record.hash
    return records


def test_intact_chain_has_no_break():
    assert chain_break(_chain(5), base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None


def test_tampered_content_is_caught_only_when_hashes_are_checked():
    records = _chain(3)
    records[1] = records[1].model_copy(update={"event": UserMsg(text="forged")})

    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH) is None
    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) == (
        "patches[1].hash: does not match the content of rev 2"
    )


def test_hashes_are_checked_over_the_event_forms_given():
    """choird hands over the JSON forms it is about to store: the hash is checked over exactly
    those, so what is stored is what was verified."""
    records = _chain(3)
    forms = [event_json(record.event) for record in records]
    forged = [*forms[:1], {**forms[1], "text": "forged"}, *forms[2:]]

    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None
    assert (
        chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True, events=forms)
        is None
    )
    assert chain_break(
        records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True, events=forged
    ) == ("patches[1].hash: does not match the content of rev 2")
    assert forms == [record.event.model_dump(mode="json") for record in records]


def test_gap_in_revisions_is_a_break():
    records = _chain(4)

    problem = chain_break([records[0], records[2]], base_rev=0, hash_prev=GENESIS_HASH)

    assert problem == "patches[1].rev: expected 2, got 3"


def test_wrong_link_is_a_break():
    records = _chain(3)

    problem = chain_break(records[1:], base_rev=1, hash_prev=GENESIS_HASH, where="tail_events")

    assert problem == "tail_events[0].hash_prev: does not match the hash of rev 1"


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2025, 1, 1, tzinfo=UTC), "2025-01-01T00:00:00.000000Z"),
        (
            datetime(2025, 1, 1, 2, 0, 0, 5, tzinfo=timezone(timedelta(hours=2))),
            "2025-01-01T00:00:00.000005Z",
        ),
    ],
)
def test_format_ts_is_utc_with_microseconds_and_z(moment: datetime, text: str):
    assert format_ts(moment) == text


def test_format_ts_rejects_naive_datetimes():
    with pytest.raises(ValueError, match="needs a UTC offset"):
        format_ts(datetime(2025, 1, 1))


def test_committed_event_timestamp_needs_an_offset():
    record = seal_record(
        GENESIS_HASH, 1, "edge", "2025-01-01T00:00:00", {"kind": "user_msg", "text": "x"}
    )

    with pytest.raises(ValueError, match="needs a UTC offset"):
        CommittedEvent.model_validate(record)
