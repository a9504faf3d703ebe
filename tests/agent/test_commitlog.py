"""The commit log: monotonic revs, the hash chain, reads from any rev, restore and search."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime

import pytest

from choir.agent.kernel.commitlog import ChainError, CommitLog, entry_from_wire, now_ts
from choir.agent.lanes.memories import Memories
from choir.core.memory.working import WorkingMemory
from choir.logs.redaction import REDACTED, replace_secrets
from choir.protocol import EDGE_LANE, GENESIS_HASH, CommittedEvent, UserMsg, chain_break, format_ts


def _filled(n: int) -> CommitLog:
    log = CommitLog()
    for i in range(n):
        log.commit("edge", UserMsg(text=f"message {i}"))
    return log


def test_revs_are_monotonic_and_chained() -> None:
    log = _filled(5)
    entries = list(log)
    assert [e.rev for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].hash_prev == GENESIS_HASH
    for prev, cur in itertools.pairwise(entries):
        assert cur.hash_prev == prev.hash
    assert log.head_rev == 5
    assert log.head_hash == entries[-1].hash
    log.verify()


def test_wire_form_is_a_valid_committed_event_with_a_matching_hash() -> None:
    log = _filled(3)
    records = [CommittedEvent.model_validate(e.wire()) for e in log]
    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None


def test_since_reads_from_any_rev() -> None:
    log = _filled(10)
    assert [e.rev for e in log.since(7)] == [8, 9, 10]
    assert [e.rev for e in log.since(0)] == list(range(1, 11))
    assert log.since(10) == []
    assert log.entry(4).rev == 4
    with pytest.raises(KeyError):
        log.entry(11)


def test_restore_continues_the_chain_from_a_base() -> None:
    full = _filled(6)
    base = full.entry(3)
    tail = [entry_from_wire(e.wire()) for e in full.since(3)]
    restored = CommitLog.restore(tail, base_rev=3, base_hash=base.hash)
    assert restored.head_rev == 6
    assert restored.head_hash == full.head_hash
    assert [e.rev for e in restored.since(4)] == [5, 6]
    new = restored.commit("edge", UserMsg(text="after restore"))
    assert new.rev == 7
    assert new.hash_prev == full.head_hash


def test_restore_refuses_a_tampered_record() -> None:
    entries = list(_filled(3))
    entries[1] = entries[1]._replace(event={**entries[1].event, "text": "forged"})
    with pytest.raises(ChainError, match="rev 2: hash does not match its content"):
        CommitLog.restore(entries)


def test_restore_refuses_a_gap() -> None:
    entries = list(_filled(3))
    with pytest.raises(ChainError, match="rev 3 does not follow rev 1"):
        CommitLog.restore([entries[0], entries[2]])


def test_find_by_keyword_and_hash_prefix_newest_first() -> None:
    log = _filled(5)
    log.commit("core:write-tests", UserMsg(text="the Quarterly report"))
    by_word = log.find("quarterly")
    assert [e.rev for e in by_word] == [6]
    target = log.entry(2)
    assert log.find(target.hash[:12]) == [target]
    assert [e.rev for e in log.find("message", limit=2)] == [5, 4]


def test_listeners_see_every_commit_until_unsubscribed() -> None:
    log = CommitLog()
    seen: list[int] = []
    unsubscribe = log.subscribe(lambda e: seen.append(e.rev))
    log.commit("edge", UserMsg(text="a"))
    unsubscribe()
    log.commit("edge", UserMsg(text="b"))
    assert seen == [1]


def test_a_lone_surrogate_is_committed_as_the_replacement_character() -> None:
    """A string no UTF-8 can hold must not stop the log: the entry keeps (and hashes, and
    ships) U+FFFD in its place, so choird recomputes the same hash from what it receives."""
    log = CommitLog()
    entry = log.commit("edge", UserMsg(text="a\ud800"))
    assert entry.event["text"] == "a\ufffd"
    committed = CommittedEvent.model_validate(entry.wire())
    assert committed.computed_hash() == entry.hash
    log.verify()


def test_commit_timestamps_are_the_wires_one_form_of_now() -> None:
    before = datetime.now(UTC)
    stamps = [now_ts() for _ in range(2000)]
    time.sleep(0.002)
    after = datetime.now(UTC)
    for stamp in stamps[::97] + stamps[-1:]:
        moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert format_ts(moment) == stamp  # six digits, Z: re-serializes to the same bytes
        assert before.replace(microsecond=0) <= moment <= after
    assert stamps == sorted(stamps)


def test_a_listener_gets_the_committed_model_only_while_the_entry_is_exactly_its_json() -> None:
    """`fresh_model` spares working memory a parse of what was just committed, but never hands
    out a model the entry does not hold: a redacted event, a preview, an appended entry."""
    log = CommitLog()
    seen: list[tuple[str, object]] = []
    log.subscribe(lambda entry: seen.append((entry.event.get("text", ""), log.fresh_model(entry))))
    message = UserMsg(text="plain")
    log.commit("edge", message)
    assert seen[-1] == ("plain", message)
    assert seen[-1][1] is message
    replace_secrets(["hunter2-secret"])
    try:
        log.commit("edge", UserMsg(text="the key is hunter2-secret"))
    finally:
        replace_secrets([])
    assert seen[-1] == (f"the key is {REDACTED}", None)
    log.append("edge", UserMsg(text="by hand").model_dump(mode="json"))
    assert seen[-1] == ("by hand", None)
    assert log.fresh_model(log.entry(1)) is None  # once its commit returned


def test_working_memory_shows_the_redacted_event_not_the_committed_model() -> None:
    log = CommitLog()
    memories = Memories()
    memories.track(WorkingMemory(EDGE_LANE))
    log.subscribe(lambda entry: memories.observe(entry, log.fresh_model(entry)))
    replace_secrets(["hunter2-secret"])
    try:
        log.commit("edge", UserMsg(text="the key is hunter2-secret"))
    finally:
        replace_secrets([])
    shown = memories.lanes[EDGE_LANE].events[-1].event
    assert isinstance(shown, UserMsg)
    assert shown.text == f"the key is {REDACTED}"
