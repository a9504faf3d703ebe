"""The operator verbs (choirctl, the TUI, the gateway -> choird, §17.1, §19.3) and their models.

Dotted names (`session.events`) on `$CHOIR_HOME/socks/choird.sock`. `OperatorVerb` is a
`StrEnum`, so a plain string names a verb as well as the member does.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final, NamedTuple

from choir.protocol.base import WireModel
from choir.protocol.operator import requests as r


class OperatorVerb(StrEnum):
    """Everything choirctl and the console may ask of choird."""

    STATUS = "status"
    AGENT_LIST = "agent.list"
    AGENT_STATUS = "agent.status"
    AGENT_START = "agent.start"
    AGENT_STOP = "agent.stop"
    AGENT_VERIFY = "agent.verify"
    AGENT_RESTART = "agent.restart"
    AGENT_BUILD = "agent.build"
    AGENT_UPDATE = "agent.update"
    AGENT_UPDATE_ALL = "agent.update_all"
    SHUTDOWN = "shutdown"
    SESSION_LIST = "session.list"
    SESSION_EVENTS = "session.events"
    SESSION_ARTIFACT = "session.artifact"
    SESSION_CORES = "session.cores"
    SESSION_LOCKS = "session.locks"
    SESSION_CANCEL = "session.cancel"
    SESSION_COMPACT = "session.compact"
    SESSION_RECOVER = "session.recover"
    APPROVAL_LIST = "approval.list"
    APPROVAL_SHOW = "approval.show"
    APPROVAL_APPROVE = "approval.approve"
    APPROVAL_REJECT = "approval.reject"
    WORKSPACE_LIST = "workspace.list"
    WORKSPACE_RESET = "workspace.reset"
    MODEL_LIST = "model.list"
    MODEL_GET = "model.get"
    MODEL_SET = "model.set"
    VOICE_LIST = "voice.list"
    VOICE_GET = "voice.get"
    VOICE_SET = "voice.set"
    LOGS = "logs"
    SECRET_LIST = "secret.list"
    SECRET_APPLY = "secret.apply"
    CONFIG_LOAD = "config.load"
    CONFIG_DIFF = "config.diff"
    CONFIG_APPLY = "config.apply"
    CONFIG_SHOW = "config.show"
    SUBSCRIBE = "subscribe"
    CHAT_SEND = "chat.send"
    CHAT_REPLIES = "chat.replies"


class OperatorModels(NamedTuple):
    request: type[WireModel]
    """The payload the verb takes."""
    streams: bool = False
    """Whether the answer is a stream of items (`session.events` only with `follow`)."""


V = OperatorVerb
OPERATOR_MODELS: Final[Mapping[OperatorVerb, OperatorModels]] = {
    V.STATUS: OperatorModels(r.NoArguments),
    V.AGENT_LIST: OperatorModels(r.NoArguments),
    V.AGENT_STATUS: OperatorModels(r.AgentRef),
    V.AGENT_START: OperatorModels(r.AgentStart),
    V.AGENT_STOP: OperatorModels(r.AgentRef),
    V.AGENT_VERIFY: OperatorModels(r.AgentRef),
    V.AGENT_RESTART: OperatorModels(r.AgentRef),
    V.AGENT_BUILD: OperatorModels(r.AgentRef, streams=True),
    V.AGENT_UPDATE: OperatorModels(r.AgentRef, streams=True),
    V.AGENT_UPDATE_ALL: OperatorModels(r.NoArguments, streams=True),
    V.SHUTDOWN: OperatorModels(r.NoArguments),
    V.SESSION_LIST: OperatorModels(r.SessionList),
    V.SESSION_EVENTS: OperatorModels(r.SessionEvents, streams=True),
    V.SESSION_ARTIFACT: OperatorModels(r.SessionArtifact),
    V.SESSION_CORES: OperatorModels(r.SessionRef),
    V.SESSION_LOCKS: OperatorModels(r.SessionRef),
    V.SESSION_CANCEL: OperatorModels(r.SessionCancel),
    V.SESSION_COMPACT: OperatorModels(r.SessionCompact),
    V.SESSION_RECOVER: OperatorModels(r.SessionRecover),
    V.APPROVAL_LIST: OperatorModels(r.ApprovalList),
    V.APPROVAL_SHOW: OperatorModels(r.ApprovalRef),
    V.APPROVAL_APPROVE: OperatorModels(r.ApprovalAnswer),
    V.APPROVAL_REJECT: OperatorModels(r.ApprovalAnswer),
    V.WORKSPACE_LIST: OperatorModels(r.NoArguments),
    V.WORKSPACE_RESET: OperatorModels(r.WorkspaceRef),
    V.MODEL_LIST: OperatorModels(r.NoArguments),
    V.MODEL_GET: OperatorModels(r.AgentRef),
    V.MODEL_SET: OperatorModels(r.ModelSet),
    V.VOICE_LIST: OperatorModels(r.NoArguments),
    V.VOICE_GET: OperatorModels(r.AgentRef),
    V.VOICE_SET: OperatorModels(r.VoiceSet),
    V.LOGS: OperatorModels(r.LogsRequest, streams=True),
    V.SECRET_LIST: OperatorModels(r.NoArguments),
    V.SECRET_APPLY: OperatorModels(r.NoArguments),
    V.CONFIG_LOAD: OperatorModels(r.NoArguments),
    V.CONFIG_DIFF: OperatorModels(r.NoArguments),
    V.CONFIG_APPLY: OperatorModels(r.NoArguments),
    V.CONFIG_SHOW: OperatorModels(r.NoArguments),
    V.SUBSCRIBE: OperatorModels(r.NoArguments, streams=True),
    V.CHAT_SEND: OperatorModels(r.ChatSend),
    V.CHAT_REPLIES: OperatorModels(r.ChatReplies, streams=True),
}
"""Every operator verb's models; `tests/protocol/test_operator_golden.py` pins their wire form."""
