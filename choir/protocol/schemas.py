"""Named JSON Schemas of the protocol, for `choirctl schema <name>` and for tool/skill authors.

The agent verbs' payloads are `<verb>-request`/`<verb>-response`; the operator verbs' (choirctl,
the TUI) are `operator.<verb>.request`, `operator.<verb>.answer` and, for a verb that streams,
`operator.<verb>.item`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.core_jobs import CoreEvent, CoreInjection, CoreJobStart
from choir.protocol.log.events import Event
from choir.protocol.log.snapshot import Snapshot
from choir.protocol.operator.contract import OPERATOR_MODELS
from choir.protocol.tooling.bindings import ResourceBindings
from choir.protocol.tooling.manifest import ToolManifest
from choir.protocol.tooling.memory import MemoryDeltaDocument, ReferenceSummary
from choir.protocol.tooling.skills import SkillSpec
from choir.protocol.tooling.tools import ToolResult
from choir.protocol.wire.envelope import RequestEnvelope, ResponseEnvelope
from choir.protocol.wire.pushes import PushEnvelope, ServerPush
from choir.protocol.wire.verbs import VERB_MODELS
from choir.protocol.wire.version import VersionInfo


def _verb_schemas() -> dict[str, Any]:
    named: dict[str, Any] = {}
    for verb, models in VERB_MODELS.items():
        stem = verb.value.lower().replace("_", "-")
        named[f"{stem}-request"] = models.request
        named[f"{stem}-response"] = models.response
    return named


def _operator_schemas() -> dict[str, Any]:
    named: dict[str, Any] = {}
    for verb, models in OPERATOR_MODELS.items():
        named[f"operator.{verb.value}.request"] = models.request
        if models.answer is not None:
            named[f"operator.{verb.value}.answer"] = models.answer
        if models.item is not None:
            named[f"operator.{verb.value}.item"] = models.item
    return named


SCHEMAS: Mapping[str, Any] = {
    "envelope": RequestEnvelope,
    "response": ResponseEnvelope,
    **_verb_schemas(),
    "push": ServerPush,
    "push-envelope": PushEnvelope,
    "event": Event,
    "committed-event": CommittedEvent,
    "core-job-start": CoreJobStart,
    "core-event": CoreEvent,
    "core-injection": CoreInjection,
    "tool-manifest": ToolManifest,
    "tool-result": ToolResult,
    "skill-spec": SkillSpec,
    "reference-summary": ReferenceSummary,
    "memory-delta": MemoryDeltaDocument,
    "snapshot": Snapshot,
    "version": VersionInfo,
    "resource-bindings": ResourceBindings,
    **_operator_schemas(),
}
"""Schema name -> model (or tagged union)."""


def schema_names() -> list[str]:
    return sorted(SCHEMAS)


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the named model; KeyError for an unknown name."""
    schema = TypeAdapter(SCHEMAS[name]).json_schema()
    schema.setdefault("title", name)
    return schema
