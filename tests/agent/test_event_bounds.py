"""Events too large to travel whole (issue 12 point 1): committed as a preview plus an artifact.

Pure: the commit log and the preview rules, no I/O. The wire form of a previewed entry must
parse as a `CommittedEvent` whose recomputed hash matches — that is what choird checks.
"""

from __future__ import annotations

import hashlib

import orjson
import pytest

from choir.agent.kernel.commitlog import CommitLog, entry_from_wire
from choir.agent.kernel.event_bounds import PREVIEW_MAX, externalize
from choir.agent.replication.policy import next_batch, patch_size
from choir.protocol import (
    GENESIS_HASH,
    AgentReplied,
    CommittedEvent,
    ModelOutput,
    ToolCall,
    UserMsg,
    canonical_json,
    chain_break,
)
from choir.protocol.wire.artifacts import EVENT_INLINE_MAX, PAGE_MAX_BYTES

BIG = "0123456789abcdef" * 125_000  # 2 MB


def test_a_small_event_is_committed_whole_with_the_hash_it_always_had() -> None:
    log = CommitLog()
    entry = log.commit("edge", UserMsg(text="hello"))

    assert entry.artifact is None
    assert "artifact" not in entry.wire()
    assert log.artifacts == {}
    record = CommittedEvent.model_validate(entry.wire())
    assert record.computed_hash() == entry.hash


def test_a_2mb_reply_is_committed_as_a_valid_preview_and_an_artifact_of_all_of_it() -> None:
    log = CommitLog()
    log.commit("edge", UserMsg(text="please be long", message_id="m-1"))
    entry = log.commit("edge", AgentReplied(text=BIG, in_reply_to="m-1"))

    assert entry.artifact is not None
    assert len(orjson.dumps(entry.wire())) < PREVIEW_MAX + 1024
    assert entry.event["in_reply_to"] == "m-1"  # short fields survive whole
    assert BIG.startswith(entry.event["text"].split("\n[")[0])
    content = log.artifacts[entry.artifact["sha256"]]
    assert hashlib.sha256(content).hexdigest() == entry.artifact["sha256"]
    assert entry.artifact["size"] == len(content)
    assert orjson.loads(content)["text"] == BIG
    assert log.resolved(entry).event["text"] == BIG
    records = [CommittedEvent.model_validate(e.wire()) for e in log]
    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None
    log.verify()


def test_the_chain_covers_the_artifact_a_preview_names() -> None:
    log = CommitLog()
    entry = log.commit("edge", AgentReplied(text=BIG))
    assert entry.artifact is not None
    forged = {**entry.wire(), "artifact": {"sha256": "0" * 64, "size": entry.artifact["size"]}}

    assert CommittedEvent.model_validate(forged).computed_hash() != entry.hash


def test_a_restored_log_keeps_the_references_and_verifies() -> None:
    log = CommitLog()
    log.commit("edge", AgentReplied(text=BIG))
    log.commit("edge", UserMsg(text="after"))

    restored = CommitLog.restore([entry_from_wire(e.wire()) for e in log])

    assert restored.head_hash == log.head_hash
    assert restored.entry(1).artifact == log.entry(1).artifact
    assert restored.resolved(restored.entry(1)).event["text"] != BIG  # artifact not held here


def test_a_model_output_with_huge_call_arguments_keeps_its_calls_in_the_preview() -> None:
    calls = [
        ToolCall(id=f"c-{n}", name="choir.fs.write", arguments={"path": f"{n}.txt", "content": BIG})
        for n in range(3)
    ]
    output = ModelOutput(lane="core:w", text="writing", tool_calls=calls, model="m")
    log = CommitLog()

    entry = log.commit("core:w", output)

    assert [c["id"] for c in entry.event["tool_calls"]] == ["c-0", "c-1", "c-2"]
    whole = log.resolved(entry).event
    assert [c["arguments"]["content"] for c in whole["tool_calls"]] == [BIG] * 3


def test_a_preview_cuts_long_lists_and_wide_objects_until_it_is_small() -> None:
    event = {
        "kind": "tool_result_committed",
        "call_id": "c-1",
        "tool": "choir.fs.search",
        "result": {
            "status": "success",
            "summary": "many matches",
            "data": {"matches": [{"path": f"f{n}.py", "line": "x" * 300} for n in range(5000)]},
            "error_code": None,
            "truncated": False,
            "artifact_ref": None,
        },
        "duration_ms": None,
    }
    assert len(canonical_json(event)) > EVENT_INLINE_MAX

    preview, ref, content = externalize(event)

    assert len(canonical_json(preview)) <= PREVIEW_MAX
    assert preview["call_id"] == "c-1"
    assert orjson.loads(content) == event
    assert ref["size"] == len(content)


@pytest.mark.parametrize("sizes", [[600_000, 600_000], [100] * 300, [200_000] * 5])
def test_heartbeat_batches_are_bounded_by_bytes_as_well_as_count(sizes: list[int]) -> None:
    log = CommitLog()
    for size in sizes:
        log.commit("edge", UserMsg(text="y" * size))
    entries = log.since(0)

    batch = next_batch(entries, max_count=256, max_bytes=PAGE_MAX_BYTES, ready=lambda _: True)

    assert batch
    assert len(batch) == 1 or sum(map(patch_size, batch)) <= PAGE_MAX_BYTES
    assert len(batch) <= 256


def test_a_batch_stops_before_an_entry_whose_artifact_choird_lacks() -> None:
    log = CommitLog()
    log.commit("edge", UserMsg(text="first"))
    log.commit("edge", AgentReplied(text=BIG))
    log.commit("edge", UserMsg(text="third"))

    batch = next_batch(
        log.since(0), max_count=256, max_bytes=PAGE_MAX_BYTES, ready=lambda e: e.artifact is None
    )

    assert [e.rev for e in batch] == [1]
