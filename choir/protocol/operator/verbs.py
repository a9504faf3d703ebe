"""The operator verbs (choirctl, the TUI, the gateway -> choird, §17.1, §19.3).

Dotted names (`session.events`) on `$CHOIR_HOME/socks/choird.sock`. `OperatorVerb` is a
`StrEnum`, so a plain string names a verb as well as the member does. Free of pydantic:
`choir.protocol.operator.contract` maps each verb to its models.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

MEMORY_STORES: Final = ("session", "knowledge")
"""The stores `memory.search` reads, the default first (what front ends offer; choird checks)."""
MEMORY_MODES: Final = ("hybrid", "semantic", "text", "session_detail", "relevance")
"""Its modes, the default first; `session_detail` is the session store's only, `relevance` the
knowledge store's."""
MEMORY_CLASSES: Final = ("knowledge", "system", "app", "personal")
"""An agent's memories (`choir.core.memory.access.MemoryClass`), the default first: what front
ends offer for a knowledge write's `memory` and a listing's filter; choird checks."""


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
    AGENT_ROLLBACK = "agent.rollback"
    SHUTDOWN = "shutdown"
    CHOIRD_RESTART = "choird.restart"
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
    APPROVAL_EXTEND = "approval.extend"
    TOOL_REGISTER = "tool.register"
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
    MEMORY_SEARCH = "memory.search"
    MEMORY_SHOW = "memory.show"
    MEMORY_STATS = "memory.stats"
    KNOWLEDGE_LIST = "knowledge.list"
    KNOWLEDGE_SHOW = "knowledge.show"
    KNOWLEDGE_PUT = "knowledge.put"
    KNOWLEDGE_DELETE = "knowledge.delete"
    KNOWLEDGE_ADD = "knowledge.add"
    KNOWLEDGE_WRITE = "knowledge.write"
    KNOWLEDGE_RENAME = "knowledge.rename"
    KNOWLEDGE_ALIAS = "knowledge.alias"
    KNOWLEDGE_HISTORY = "knowledge.history"
    KNOWLEDGE_RESTORE = "knowledge.restore"
    KNOWLEDGE_LINK = "knowledge.link"
    KNOWLEDGE_UNLINK = "knowledge.unlink"
    KNOWLEDGE_SOURCE = "knowledge.source"
    KNOWLEDGE_EXPAND = "knowledge.expand"
    MEMORY_ABOUT = "memory.about"
    MEMORY_FORGET = "memory.forget"
    MEMORY_REEMBED = "memory.reembed"
    MEMORY_BACKFILL_TOOLS = "memory.backfill_tools"
    SESSION_MESSAGES = "session.messages"
    GATEWAY_STATUS = "gateway.status"
    SESSION_INJECT = "session.inject"
    USAGE = "usage"
    INBOX_LIST = "inbox.list"
    INBOX_RESOLVE = "inbox.resolve"
