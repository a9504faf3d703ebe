"""Server pushes: choird -> agent messages on the connection's push channel.

The 8 verbs run agent -> choird. The other direction (design notes, "Message flow") rides pushes:
frames on the Unix socket, SSE events over HTTP (§12.1). `seq` orders them per session and lets
an SSE client resume with Last-Event-ID. Beyond the list in the design notes,
`approval_resolved` tells the agent how a proposal ended (§19.6), and `core_inject` carries a
user's instruction for one core job (a Telegram job card, `choirctl session inject`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from choir.protocol.base import WireModel
from choir.protocol.log.lanes import JobName, LaneId


class UserMessagePush(WireModel):
    """A user message from the bound DM; the edge lane queues it (§7.1)."""

    kind: Literal["user_message"] = "user_message"
    message_id: str
    """The gateway's id, so a re-delivered message is recognized."""
    text: str
    """The message text."""
    attachments: list[str] = Field(default_factory=list)
    """Workspace paths choird staged under `.choirtmp/recv/`."""


class InjectPush(WireModel):
    """`/inject <message>`: append to edge's context at its next safe point (§12.8)."""

    kind: Literal["inject"] = "inject"
    text: str = Field(min_length=1)
    """The instruction to append."""


class CoreInjectPush(WireModel):
    """An instruction from the user for one core job (`choirctl session inject`, a Telegram
    job card's [Inject…]): the job reads it at its next step, as an edge injection (§12.8)."""

    kind: Literal["core_inject"] = "core_inject"
    job_name: JobName
    """The job to instruct."""
    text: str = Field(min_length=1)
    """The instruction."""


class CoreCancelPush(WireModel):
    """Cancel one core job (`/cancel <name>`, `choirctl session cancel`)."""

    kind: Literal["core_cancel"] = "core_cancel"
    job_name: JobName
    """The job to cancel."""
    reason: str = "cancelled by the operator"
    """Why, for the job's report."""


class CompactPush(WireModel):
    """Compact working memory now (`/compact`, `choirctl session compact`)."""

    kind: Literal["compact"] = "compact"
    lane: LaneId | None = None
    """Lane to compact; None compacts every lane."""


class ConfigChangedPush(WireModel):
    """A newer config version is published; fetch it with FETCH_DYNAMIC_CONFIG."""

    kind: Literal["config_changed"] = "config_changed"
    config_version: int = Field(ge=0)
    """The newly published version."""


class SecretsRefreshedPush(WireModel):
    """Secret values changed (`choirctl secret apply`); re-fetch them with GET_SECRETS."""

    kind: Literal["secrets_refreshed"] = "secrets_refreshed"
    secrets: list[str] = Field(default_factory=list)
    """Names of the changed secrets the agent uses; never values."""


class ShutdownPush(WireModel):
    """Stop gracefully (§17.2): reach a safe point, summarize, flush, TERMINATE_SELF."""

    kind: Literal["shutdown"] = "shutdown"
    reason: Literal["stop", "restart", "update", "workspace_reset"]
    """Why the agent is being stopped; restart and update resume the session."""
    summary_timeout_ms: int = Field(default=30_000, ge=0)
    """Budget for the session summary call; 0 skips the summary (§11.8)."""


TIMED_OUT_REASON: Final = "nobody answered in time"
"""`ApprovalResolvedPush.reason` of an approval rejected because nobody answered (§19.6)."""


class ApprovalResolvedPush(WireModel):
    """A pending approval was answered or timed out (§19.6)."""

    kind: Literal["approval_resolved"] = "approval_resolved"
    approval_id: str
    """The approval answered."""
    status: Literal["approved", "applied", "rejected", "failed", "timed_out"]
    """How it ended; a timeout is `rejected` (§19.6; `timed_out` only from an older choird). A
    proposal choird applies (a skill) ends `applied` or `failed`, told once the apply ends."""
    reason: str | None = Field(default=None, exclude_if=lambda reason: reason is None)
    """What was applied, or the failed step and why (left out when none)."""
    extend_by: int | None = Field(default=None, ge=1)
    """An approved `budget_extension`: how much more of the budget was granted."""


class RecoverPush(WireModel):
    """The operator's decision on a core job held after a crash (`choirctl session recover`).

    A held job had a non-idempotent call whose outcome the crash left unknown; it is not resumed
    until the operator chooses (DESIGN-NOTES "Durability").
    """

    kind: Literal["recover"] = "recover"
    choice: Literal["resume", "read_only", "abort"]
    """Resume the job, resume it limited to tools that only read, or stop it with a report."""
    job_name: JobName | None = None
    """The held job decided on; None decides every held job of the session."""


ServerPush = Annotated[
    UserMessagePush
    | InjectPush
    | CoreCancelPush
    | CompactPush
    | ConfigChangedPush
    | SecretsRefreshedPush
    | ShutdownPush
    | ApprovalResolvedPush
    | RecoverPush
    | CoreInjectPush,
    Field(discriminator="kind"),
]
"""Any choird -> agent push, tagged by `kind`."""


class PushEnvelope(WireModel):
    session_id: str
    """The session the push is for."""
    seq: int = Field(ge=1)
    """Per-session push sequence number; the SSE event id."""
    push: ServerPush
    """The push itself."""
