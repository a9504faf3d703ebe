"""Each operator verb's models: its request, its answer, the items it streams.

`tests/protocol/test_operator_golden.py` pins their wire form; `choirctl schema` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from choir.protocol.base import WireModel
from choir.protocol.operator import answers as a
from choir.protocol.operator import items as i
from choir.protocol.operator import requests as r
from choir.protocol.operator import views as v
from choir.protocol.operator.verbs import OperatorVerb


class OperatorModels(NamedTuple):
    request: type[WireModel]
    """The payload the verb takes."""
    answer: type[WireModel] | None
    """Its answer; for a verb reporting progress, the result its last item carries. None for
    a verb that only streams."""
    item: Any = None
    """The type of its stream's items (a model or a union tagged by `kind`); None when it
    answers once (`session.events` streams only with `follow`)."""


V = OperatorVerb
OPERATOR_MODELS: Final[Mapping[OperatorVerb, OperatorModels]] = {
    V.STATUS: OperatorModels(r.NoArguments, a.StatusAnswer),
    V.AGENT_LIST: OperatorModels(r.NoArguments, a.AgentList),
    V.AGENT_STATUS: OperatorModels(r.AgentRef, a.AgentStatus),
    V.AGENT_START: OperatorModels(r.AgentStart, a.AgentStarted),
    V.AGENT_STOP: OperatorModels(r.AgentRef, a.AgentStopped),
    V.AGENT_VERIFY: OperatorModels(r.AgentRef, v.VerifyReport),
    V.AGENT_RESTART: OperatorModels(r.AgentRef, a.AgentRestarted),
    V.AGENT_BUILD: OperatorModels(r.AgentRef, a.ImageBuilt, i.BuildItem),
    V.AGENT_UPDATE: OperatorModels(r.AgentRef, a.UpdateOutcome, i.UpdateItem),
    V.AGENT_UPDATE_ALL: OperatorModels(r.NoArguments, a.UpdateAll, i.UpdateAllItem),
    V.AGENT_ROLLBACK: OperatorModels(r.AgentRollback, a.RolledBack, i.RollbackItem),
    V.SHUTDOWN: OperatorModels(r.NoArguments, a.ChoirdShutdown),
    V.CHOIRD_RESTART: OperatorModels(r.NoArguments, a.ChoirdRestarting),
    V.SESSION_LIST: OperatorModels(r.SessionList, a.SessionList),
    V.SESSION_EVENTS: OperatorModels(r.SessionEvents, a.SessionEvents, v.EventView),
    V.SESSION_ARTIFACT: OperatorModels(r.SessionArtifact, a.ArtifactChunk),
    V.SESSION_CORES: OperatorModels(r.SessionRef, a.SessionCores),
    V.SESSION_LOCKS: OperatorModels(r.SessionRef, v.LocksView),
    V.SESSION_CANCEL: OperatorModels(r.SessionCancel, a.CancelRequested),
    V.SESSION_COMPACT: OperatorModels(r.SessionCompact, a.CompactRequested),
    V.SESSION_RECOVER: OperatorModels(r.SessionRecover, a.SessionRecovery),
    V.APPROVAL_LIST: OperatorModels(r.ApprovalList, a.ApprovalList),
    V.APPROVAL_SHOW: OperatorModels(r.ApprovalRef, v.ApprovalView),
    V.APPROVAL_APPROVE: OperatorModels(r.ApprovalAnswer, v.ApprovalView),
    V.APPROVAL_REJECT: OperatorModels(r.ApprovalAnswer, v.ApprovalView),
    V.APPROVAL_EXTEND: OperatorModels(r.ApprovalExtend, v.ApprovalView),
    V.TOOL_REGISTER: OperatorModels(r.ToolRegister, v.ApprovalView),
    V.WORKSPACE_LIST: OperatorModels(r.NoArguments, a.WorkspaceList),
    V.WORKSPACE_RESET: OperatorModels(r.WorkspaceRef, a.WorkspaceReset),
    V.MODEL_LIST: OperatorModels(r.NoArguments, a.ModelList),
    V.MODEL_GET: OperatorModels(r.AgentRef, a.AgentChoices),
    V.MODEL_SET: OperatorModels(r.ModelSet, a.BindingSwitched),
    V.VOICE_LIST: OperatorModels(r.NoArguments, a.VoiceList),
    V.VOICE_GET: OperatorModels(r.AgentRef, a.AgentChoices),
    V.VOICE_SET: OperatorModels(r.VoiceSet, a.BindingSwitched),
    V.LOGS: OperatorModels(r.LogsRequest, None, i.LogItem),
    V.SECRET_LIST: OperatorModels(r.NoArguments, a.SecretList),
    V.SECRET_APPLY: OperatorModels(r.NoArguments, a.SecretsApplied),
    V.CONFIG_LOAD: OperatorModels(r.NoArguments, a.ConfigLoaded),
    V.CONFIG_DIFF: OperatorModels(r.NoArguments, a.ConfigChanges),
    V.CONFIG_APPLY: OperatorModels(r.NoArguments, a.ConfigApplied),
    V.CONFIG_SHOW: OperatorModels(r.NoArguments, a.ConfigShown),
    V.SUBSCRIBE: OperatorModels(r.NoArguments, None, i.FeedItem),
    V.CHAT_SEND: OperatorModels(r.ChatSend, a.ChatSent),
    V.CHAT_REPLIES: OperatorModels(r.ChatReplies, None, a.ChatReply),
    V.MEMORY_SEARCH: OperatorModels(r.MemorySearch, a.MemorySearch),
    V.MEMORY_SHOW: OperatorModels(r.MemoryItemRef, a.MemoryItem),
    V.MEMORY_STATS: OperatorModels(r.MemoryStatsRequest, a.MemoryStats),
    V.KNOWLEDGE_LIST: OperatorModels(r.KnowledgeList, a.KnowledgeList),
    V.KNOWLEDGE_SHOW: OperatorModels(r.KnowledgeRef, a.KnowledgeView),
    V.KNOWLEDGE_PUT: OperatorModels(r.KnowledgePut, a.KnowledgeStored),
    V.KNOWLEDGE_DELETE: OperatorModels(r.KnowledgeRef, a.KnowledgeDeleted),
    V.KNOWLEDGE_SOURCE: OperatorModels(r.KnowledgeRef, a.KnowledgeSource),
    V.KNOWLEDGE_EXPAND: OperatorModels(r.KnowledgeExpand, a.KnowledgeExpansion),
    V.MEMORY_ABOUT: OperatorModels(r.MemoryAbout, a.MemoryAbout),
    V.MEMORY_FORGET: OperatorModels(r.MemoryForget, a.MemoryForgotten),
    V.KNOWLEDGE_ADD: OperatorModels(r.KnowledgeAdd, a.KnowledgeStored),
    V.KNOWLEDGE_WRITE: OperatorModels(r.KnowledgeWrite, a.KnowledgeStored),
    V.KNOWLEDGE_RENAME: OperatorModels(r.KnowledgeRename, a.KnowledgeView),
    V.KNOWLEDGE_ALIAS: OperatorModels(r.KnowledgeAlias, a.KnowledgeView),
    V.KNOWLEDGE_HISTORY: OperatorModels(r.KnowledgeHistoryRequest, a.KnowledgeHistory),
    V.KNOWLEDGE_RESTORE: OperatorModels(r.KnowledgeRestore, a.KnowledgeStored),
    V.KNOWLEDGE_LINK: OperatorModels(r.KnowledgeLink, a.KnowledgeLinked),
    V.KNOWLEDGE_UNLINK: OperatorModels(r.KnowledgeUnlink, a.KnowledgeUnlinked),
    V.MEMORY_REEMBED: OperatorModels(r.MemoryReembed, a.MemoryReembedded, i.ReembedItem),
    V.SESSION_MESSAGES: OperatorModels(r.SessionMessages, a.SessionMessages),
    V.MEMORY_BACKFILL_TOOLS: OperatorModels(
        r.MemoryBackfillTools, a.MemoryToolsBackfilled, i.BackfillToolsItem
    ),
    V.GATEWAY_STATUS: OperatorModels(r.NoArguments, a.GatewayStatus),
    V.SESSION_INJECT: OperatorModels(r.SessionInject, a.InjectRequested),
    V.USAGE: OperatorModels(r.UsageRequest, a.UsageReport),
    V.INBOX_LIST: OperatorModels(r.InboxList, a.InboxList),
    V.INBOX_RESOLVE: OperatorModels(r.InboxResolve, a.InboxResolved),
}
"""Every operator verb's models; `tests/protocol/test_operator_golden.py` pins their wire form."""
