"""Golden documents of every protocol version must keep parsing — and re-serialize byte-stable.

Re-serialization matters beyond compatibility: committed events are hashed over their JSON
form, so a model change that alters the dump of an old document would break stored chains.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import TypeAdapter

from choir.protocol import (
    PROTOCOL_VERSION,
    VERB_MODELS,
    CommittedEvent,
    CoreEvent,
    CoreInjection,
    CoreJobStart,
    ErrorDetails,
    Event,
    MemoryDeltaDocument,
    PushEnvelope,
    ReferenceSummary,
    RequestEnvelope,
    ResponseEnvelope,
    ServerPush,
    SkillSpec,
    Snapshot,
    ToolManifest,
    ToolResult,
    Verb,
    VersionInfo,
    chain_break,
)
from choir.protocol.log.chain import GENESIS_HASH

GOLDEN = Path(__file__).parent / "golden"

FAMILIES: dict[str, dict[str, Any]] = {
    "envelope.json": {
        "request": RequestEnvelope,
        "response_ok": ResponseEnvelope,
        "response_error": ResponseEnvelope,
        "response_error_base_rev": ResponseEnvelope,
        "response_error_forked": ResponseEnvelope,
    },
    "events.json": {"committed_events": list[CommittedEvent]},
    "core_jobs.json": {
        "core_job_start": CoreJobStart,
        "core_events": list[CoreEvent],
        "core_injection": CoreInjection,
    },
    "tools.json": {
        "builtin_manifest": ToolManifest,
        "external_manifest": ToolManifest,
        "tool_result": ToolResult,
    },
    "skills.json": {"skill_spec": SkillSpec},
    "memory.json": {"reference_summary": ReferenceSummary, "memory_delta": MemoryDeltaDocument},
    "snapshot.json": {"snapshot": Snapshot},
    "version.json": {"version": VersionInfo},
    "pushes.json": {"push_envelopes": list[PushEnvelope]},
}


def _load(version: int, name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((GOLDEN / f"v{version}" / name).read_text())
    return document


def _kinds(union: Any) -> set[str]:
    members = get_args(get_args(union)[0])
    return {member.model_fields["kind"].default for member in members}


def test_there_is_a_golden_directory_per_protocol_version():
    versions = sorted(int(path.name[1:]) for path in GOLDEN.iterdir() if path.is_dir())
    assert versions == list(range(1, PROTOCOL_VERSION + 1))


def test_every_golden_file_belongs_to_a_family():
    names = {path.name for path in (GOLDEN / "v1").iterdir()}
    assert names == {*FAMILIES, "verbs.json", "operator.json"}


@pytest.mark.parametrize(
    ("name", "entry"), [(name, entry) for name, entries in FAMILIES.items() for entry in entries]
)
def test_golden_document_parses_and_reserializes_identically(name: str, entry: str):
    document = _load(1, name)[entry]
    adapter: TypeAdapter[Any] = TypeAdapter(FAMILIES[name][entry])

    parsed = adapter.validate_python(document)

    assert adapter.dump_python(parsed, mode="json") == document


@pytest.mark.parametrize("verb", list(Verb))
def test_golden_payloads_of_every_verb_parse_and_reserialize(verb: Verb):
    golden = _load(1, "verbs.json")[verb.value]
    models = VERB_MODELS[verb]

    request = models.request.model_validate(golden["request"])
    response = models.response.model_validate(golden["response"])

    assert request.model_dump(mode="json") == golden["request"]
    assert response.model_dump(mode="json") == golden["response"]


def test_golden_event_log_is_an_intact_hash_chain():
    records = TypeAdapter(list[CommittedEvent]).validate_python(
        _load(1, "events.json")["committed_events"]
    )

    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None


def test_goldens_cover_every_event_core_event_push_and_error_details_kind():
    events = {e["event"]["kind"] for e in _load(1, "events.json")["committed_events"]}
    core_events = {e["kind"] for e in _load(1, "core_jobs.json")["core_events"]}
    pushes = {p["push"]["kind"] for p in _load(1, "pushes.json")["push_envelopes"]}
    responses = _load(1, "envelope.json").values()
    errors = [document.get("error") or {} for document in responses]
    details = {error["details"]["kind"] for error in errors if "details" in error}

    assert events == _kinds(Event)
    assert core_events == _kinds(CoreEvent)
    assert pushes == _kinds(ServerPush)
    assert details == _kinds(ErrorDetails)


def test_an_error_without_details_keeps_its_old_form():
    """Details are optional and left out when absent: an error from before them parses to no
    details and re-serializes without the key."""
    document = _load(1, "envelope.json")["response_error"]

    parsed = ResponseEnvelope.model_validate(document)

    assert parsed.error is not None
    assert parsed.error.details is None
    assert "details" not in parsed.model_dump(mode="json")["error"]
