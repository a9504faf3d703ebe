"""choir's wire and domain models: the one language choird, choir-agent, choirctl and the TUI share.

Pure: no I/O. Every model is a frozen `WireModel` that rejects unknown keys; tagged unions use a
`kind` literal. `PROTOCOL_VERSION` is checked at INIT_HELLO; golden files under
`tests/protocol/golden/v<N>/` must keep parsing.

Submodules load on first use (PEP 562): importing one model — as choirctl does at start-up —
does not pay for building every other model's validator.

The public names are listed once, in `_LAZY` (name -> the submodule defining it); `__all__`
is derived from it. The `TYPE_CHECKING` imports are the same table for the type checker,
which cannot follow `__getattr__`; `tests/protocol/test_public_names.py` keeps the two equal
and checks every name resolves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from choir.protocol.base import (
        WireModel,
    )
    from choir.protocol.log.chain import (
        GENESIS_HASH,
        canonical_json,
        chain_hash,
        commit_hash,
        seal_record,
    )
    from choir.protocol.log.committed import (
        CommittedEvent,
        chain_break,
        event_json,
    )
    from choir.protocol.log.core_jobs import (
        ContextBundle,
        CoreError,
        CoreEvent,
        CoreFinalResult,
        CoreInjection,
        CoreJobStart,
        CoreNeedInfo,
        CorePartialResult,
        CorePlan,
        CoreProgress,
        CoreThoughtSummary,
        CoreToolProposal,
        PlanStep,
        ToolConstraints,
    )
    from choir.protocol.log.events import (
        AgentReplied,
        ApprovalResolved,
        Cancelled,
        CoreEventEmitted,
        CoreStarted,
        CoreStopped,
        Event,
        InjectedInstruction,
        LlmCallRecorded,
        MemoryRecalled,
        MemoryRollup,
        MemoryWriteCommitted,
        ModelOutput,
        RecalledItem,
        SessionSummary,
        SkillTransitionCommitted,
        ToolCall,
        ToolCallCommitted,
        ToolCallRequested,
        ToolResultCommitted,
        Usage,
        UserMsg,
    )
    from choir.protocol.log.lanes import (
        EDGE_LANE,
        CoreStatus,
        EdgeStatus,
        JobName,
        LaneId,
        LaneStatus,
        core_lane,
        is_lane,
        job_name_of,
    )
    from choir.protocol.log.snapshot import (
        LaneState,
        OpenJob,
        SkillProgress,
        Snapshot,
    )
    from choir.protocol.names import (
        SkillName,
        StateName,
        ToolName,
        from_wire_name,
        is_tool_name,
        to_wire_name,
    )
    from choir.protocol.problems import (
        validation_problems,
    )
    from choir.protocol.revision import PROTOCOL_VERSION
    from choir.protocol.scalars import (
        Sha256Hex,
        UtcTimestamp,
        format_ts,
    )
    from choir.protocol.tooling.bindings import (
        ResourceBindings,
        SecretResource,
    )
    from choir.protocol.tooling.locks import (
        HeldLock,
        LockMode,
        LockSpec,
        LockState,
        LockWaiter,
    )
    from choir.protocol.tooling.manifest import (
        META_PREFIX,
        Exposure,
        Implementation,
        LlmView,
        RuntimeView,
        SideEffect,
        ToolManifest,
    )
    from choir.protocol.tooling.memory import (
        Fact,
        FactKey,
        MemoryDelta,
        MemoryDeltaDocument,
        ReferenceSummary,
    )
    from choir.protocol.tooling.skills import (
        SkillSpec,
        SkillState,
        Transition,
        skill_problems,
    )
    from choir.protocol.tooling.tools import (
        ToolResult,
        ToolStatus,
    )
    from choir.protocol.wire.envelope import (
        RequestEnvelope,
        ResponseEnvelope,
        RpcError,
    )
    from choir.protocol.wire.error_codes import (
        ErrorCode,
    )
    from choir.protocol.wire.error_details import (
        BaseRevConflict,
        ChainForked,
        ErrorDetails,
        error_details,
    )
    from choir.protocol.wire.payloads import (
        Ack,
        ApprovalRequestType,
        ExecuteHostToolRequest,
        ExecuteHostToolResponse,
        FetchDynamicConfigRequest,
        FetchDynamicConfigResponse,
        GetSecretsRequest,
        GetSecretsResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        InitHelloRequest,
        InitHelloResponse,
        ReportStatusRequest,
        RequestApprovalRequest,
        RequestApprovalResponse,
        SpendSoFar,
        TerminateSelfRequest,
    )
    from choir.protocol.wire.pushes import (
        ApprovalResolvedPush,
        CompactPush,
        ConfigChangedPush,
        CoreCancelPush,
        CoreInjectPush,
        InjectPush,
        PushEnvelope,
        RecoverPush,
        SecretsRefreshedPush,
        ServerPush,
        ShutdownPush,
        UserMessagePush,
    )
    from choir.protocol.wire.verbs import (
        VERB_MODELS,
        Verb,
        VerbModels,
        parse_request_payload,
        parse_response_payload,
    )
    from choir.protocol.wire.version import (
        VersionInfo,
        skill_manifest_hash,
        tool_manifest_hash,
    )

_LAZY: dict[str, str] = {
    "PROTOCOL_VERSION": "choir.protocol.revision",
    "WireModel": "choir.protocol.base",
    "ResourceBindings": "choir.protocol.tooling.bindings",
    "SecretResource": "choir.protocol.tooling.bindings",
    "GENESIS_HASH": "choir.protocol.log.chain",
    "canonical_json": "choir.protocol.log.chain",
    "chain_hash": "choir.protocol.log.chain",
    "commit_hash": "choir.protocol.log.chain",
    "seal_record": "choir.protocol.log.chain",
    "CommittedEvent": "choir.protocol.log.committed",
    "chain_break": "choir.protocol.log.committed",
    "event_json": "choir.protocol.log.committed",
    "ContextBundle": "choir.protocol.log.core_jobs",
    "CoreError": "choir.protocol.log.core_jobs",
    "CoreEvent": "choir.protocol.log.core_jobs",
    "CoreFinalResult": "choir.protocol.log.core_jobs",
    "CoreInjection": "choir.protocol.log.core_jobs",
    "CoreJobStart": "choir.protocol.log.core_jobs",
    "CoreNeedInfo": "choir.protocol.log.core_jobs",
    "CorePartialResult": "choir.protocol.log.core_jobs",
    "CorePlan": "choir.protocol.log.core_jobs",
    "CoreProgress": "choir.protocol.log.core_jobs",
    "CoreThoughtSummary": "choir.protocol.log.core_jobs",
    "CoreToolProposal": "choir.protocol.log.core_jobs",
    "PlanStep": "choir.protocol.log.core_jobs",
    "ToolConstraints": "choir.protocol.log.core_jobs",
    "ErrorCode": "choir.protocol.wire.error_codes",
    "BaseRevConflict": "choir.protocol.wire.error_details",
    "ChainForked": "choir.protocol.wire.error_details",
    "ErrorDetails": "choir.protocol.wire.error_details",
    "error_details": "choir.protocol.wire.error_details",
    "RequestEnvelope": "choir.protocol.wire.envelope",
    "ResponseEnvelope": "choir.protocol.wire.envelope",
    "RpcError": "choir.protocol.wire.envelope",
    "AgentReplied": "choir.protocol.log.events",
    "ApprovalResolved": "choir.protocol.log.events",
    "Cancelled": "choir.protocol.log.events",
    "CoreEventEmitted": "choir.protocol.log.events",
    "CoreStarted": "choir.protocol.log.events",
    "CoreStopped": "choir.protocol.log.events",
    "Event": "choir.protocol.log.events",
    "InjectedInstruction": "choir.protocol.log.events",
    "LlmCallRecorded": "choir.protocol.log.events",
    "MemoryRecalled": "choir.protocol.log.events",
    "MemoryRollup": "choir.protocol.log.events",
    "RecalledItem": "choir.protocol.log.events",
    "MemoryWriteCommitted": "choir.protocol.log.events",
    "ModelOutput": "choir.protocol.log.events",
    "SessionSummary": "choir.protocol.log.events",
    "SkillTransitionCommitted": "choir.protocol.log.events",
    "ToolCall": "choir.protocol.log.events",
    "ToolCallCommitted": "choir.protocol.log.events",
    "ToolCallRequested": "choir.protocol.log.events",
    "ToolResultCommitted": "choir.protocol.log.events",
    "Usage": "choir.protocol.log.events",
    "UserMsg": "choir.protocol.log.events",
    "EDGE_LANE": "choir.protocol.log.lanes",
    "CoreStatus": "choir.protocol.log.lanes",
    "EdgeStatus": "choir.protocol.log.lanes",
    "JobName": "choir.protocol.log.lanes",
    "LaneId": "choir.protocol.log.lanes",
    "LaneStatus": "choir.protocol.log.lanes",
    "core_lane": "choir.protocol.log.lanes",
    "is_lane": "choir.protocol.log.lanes",
    "job_name_of": "choir.protocol.log.lanes",
    "HeldLock": "choir.protocol.tooling.locks",
    "LockMode": "choir.protocol.tooling.locks",
    "LockSpec": "choir.protocol.tooling.locks",
    "LockState": "choir.protocol.tooling.locks",
    "LockWaiter": "choir.protocol.tooling.locks",
    "META_PREFIX": "choir.protocol.tooling.manifest",
    "Exposure": "choir.protocol.tooling.manifest",
    "Implementation": "choir.protocol.tooling.manifest",
    "LlmView": "choir.protocol.tooling.manifest",
    "RuntimeView": "choir.protocol.tooling.manifest",
    "SideEffect": "choir.protocol.tooling.manifest",
    "ToolManifest": "choir.protocol.tooling.manifest",
    "Fact": "choir.protocol.tooling.memory",
    "FactKey": "choir.protocol.tooling.memory",
    "MemoryDelta": "choir.protocol.tooling.memory",
    "MemoryDeltaDocument": "choir.protocol.tooling.memory",
    "ReferenceSummary": "choir.protocol.tooling.memory",
    "SkillName": "choir.protocol.names",
    "StateName": "choir.protocol.names",
    "ToolName": "choir.protocol.names",
    "from_wire_name": "choir.protocol.names",
    "is_tool_name": "choir.protocol.names",
    "to_wire_name": "choir.protocol.names",
    "Ack": "choir.protocol.wire.payloads",
    "ApprovalRequestType": "choir.protocol.wire.payloads",
    "ExecuteHostToolRequest": "choir.protocol.wire.payloads",
    "ExecuteHostToolResponse": "choir.protocol.wire.payloads",
    "FetchDynamicConfigRequest": "choir.protocol.wire.payloads",
    "FetchDynamicConfigResponse": "choir.protocol.wire.payloads",
    "GetSecretsRequest": "choir.protocol.wire.payloads",
    "GetSecretsResponse": "choir.protocol.wire.payloads",
    "HeartbeatRequest": "choir.protocol.wire.payloads",
    "HeartbeatResponse": "choir.protocol.wire.payloads",
    "InitHelloRequest": "choir.protocol.wire.payloads",
    "InitHelloResponse": "choir.protocol.wire.payloads",
    "SpendSoFar": "choir.protocol.wire.payloads",
    "ReportStatusRequest": "choir.protocol.wire.payloads",
    "RequestApprovalRequest": "choir.protocol.wire.payloads",
    "RequestApprovalResponse": "choir.protocol.wire.payloads",
    "TerminateSelfRequest": "choir.protocol.wire.payloads",
    "validation_problems": "choir.protocol.problems",
    "ApprovalResolvedPush": "choir.protocol.wire.pushes",
    "CompactPush": "choir.protocol.wire.pushes",
    "ConfigChangedPush": "choir.protocol.wire.pushes",
    "CoreCancelPush": "choir.protocol.wire.pushes",
    "CoreInjectPush": "choir.protocol.wire.pushes",
    "InjectPush": "choir.protocol.wire.pushes",
    "PushEnvelope": "choir.protocol.wire.pushes",
    "RecoverPush": "choir.protocol.wire.pushes",
    "SecretsRefreshedPush": "choir.protocol.wire.pushes",
    "ServerPush": "choir.protocol.wire.pushes",
    "ShutdownPush": "choir.protocol.wire.pushes",
    "UserMessagePush": "choir.protocol.wire.pushes",
    "Sha256Hex": "choir.protocol.scalars",
    "UtcTimestamp": "choir.protocol.scalars",
    "format_ts": "choir.protocol.scalars",
    "SkillSpec": "choir.protocol.tooling.skills",
    "SkillState": "choir.protocol.tooling.skills",
    "Transition": "choir.protocol.tooling.skills",
    "skill_problems": "choir.protocol.tooling.skills",
    "LaneState": "choir.protocol.log.snapshot",
    "OpenJob": "choir.protocol.log.snapshot",
    "SkillProgress": "choir.protocol.log.snapshot",
    "Snapshot": "choir.protocol.log.snapshot",
    "ToolResult": "choir.protocol.tooling.tools",
    "ToolStatus": "choir.protocol.tooling.tools",
    "VERB_MODELS": "choir.protocol.wire.verbs",
    "Verb": "choir.protocol.wire.verbs",
    "VerbModels": "choir.protocol.wire.verbs",
    "parse_request_payload": "choir.protocol.wire.verbs",
    "parse_response_payload": "choir.protocol.wire.verbs",
    "VersionInfo": "choir.protocol.wire.version",
    "skill_manifest_hash": "choir.protocol.wire.version",
    "tool_manifest_hash": "choir.protocol.wire.version",
}
"""Every public name of `choir.protocol` and the submodule that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [*_LAZY]
