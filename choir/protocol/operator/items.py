"""The items of the streaming operator verbs, each a union tagged by `kind`.

- `subscribe`: `FeedItem` — the live updates a console redraws from (`{kind, data}`).
- `logs`: `LogItem` — batches of lines, the end of the snapshot, a rotation.
- `agent.build`, `agent.update`, `agent.update_all`: `Progress` items while the work runs,
  then one result item (`BuildItem`, `UpdateItem`, `UpdateAllItem`).
- `session.events` with follow: `EventView`; `chat.replies`: `ChatReply`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from choir.protocol.operator.answers import (
    AgentReembedded,
    ImageBuilt,
    MemoryReembedded,
    MemoryToolsBackfilled,
    RolledBack,
    UpdateAll,
    UpdateOutcome,
)
from choir.protocol.operator.views import (
    ApprovalView,
    LaneView,
    LocksView,
    OperatorModel,
    ProblemFields,
    SessionEndedView,
    Sparse,
)

# -- subscribe --------------------------------------------------------------------------------


class Subscribed(OperatorModel):
    config_version: int


class ConfigChanged(OperatorModel):
    config_version: int
    reason: str


class SecretsChanged(OperatorModel):
    changed: list[str]
    """The secret paths that changed."""


class HealthView(OperatorModel):
    """choird's own problems; None where all is well."""

    postgres: ProblemFields | None
    disk: ProblemFields | None


class SubscribedItem(OperatorModel):
    """First item of every stream: the reader is attached."""

    kind: Literal["subscribed"] = "subscribed"
    data: Subscribed


class SessionItem(OperatorModel):
    """A session ended."""

    kind: Literal["session"] = "session"
    data: SessionEndedView


class ApprovalItem(OperatorModel):
    """An approval was requested or resolved."""

    kind: Literal["approval"] = "approval"
    data: ApprovalView


class LaneItem(OperatorModel):
    """A lane reported its state."""

    kind: Literal["lane"] = "lane"
    data: LaneView


class LocksItem(OperatorModel):
    """An agent's lock table changed."""

    kind: Literal["locks"] = "locks"
    data: LocksView


class ConfigItem(OperatorModel):
    """config_version changed."""

    kind: Literal["config"] = "config"
    data: ConfigChanged


class SecretsItem(OperatorModel):
    """Secrets were applied."""

    kind: Literal["secrets"] = "secrets"
    data: SecretsChanged


class HealthItem(OperatorModel):
    """choird's health changed."""

    kind: Literal["health"] = "health"
    data: HealthView


FeedItem = Annotated[
    SubscribedItem
    | SessionItem
    | ApprovalItem
    | LaneItem
    | LocksItem
    | ConfigItem
    | SecretsItem
    | HealthItem,
    Field(discriminator="kind"),
]
"""One `subscribe` item."""

# -- logs -------------------------------------------------------------------------------------


class LogLines(OperatorModel):
    """Whole lines, as written (JSON lines)."""

    kind: Literal["lines"] = "lines"
    lines: list[str]


class LogSnapshotEnd(OperatorModel):
    """The file's contents when the stream began have all been sent."""

    kind: Literal["snapshot_end"] = "snapshot_end"


class LogRotated(OperatorModel):
    """The file was archived or replaced while followed; lines from the new file follow."""

    kind: Literal["rotated"] = "rotated"


LogItem = Annotated[LogLines | LogSnapshotEnd | LogRotated, Field(discriminator="kind")]
"""One `logs` item."""

# -- build and update -------------------------------------------------------------------------


class Progress(Sparse):
    """A step of a long verb: a build step (`step` of `total`, or one `log` line of docker
    build output), an update's phase, (`update_all`) an agent's outcome, or (`memory.reembed`)
    an agent's finished run."""

    kind: Literal["progress"] = "progress"
    agent_id: str
    phase: str
    """`build`, `stop`, `start`, `outcome`, `reembed`, `reembedded` or `backfill-tools`."""
    total: int | None = None
    step: int | None = None
    title: str | None = None
    detail: str | None = None
    log: str | None = None
    outcome: UpdateOutcome | None = None
    reembedded: AgentReembedded | None = None
    """Phase `reembedded`: the agent's row of the result, sent as soon as its run finished (a
    reader whose stream breaks later still knows it finished)."""


class BuildResult(OperatorModel):
    kind: Literal["result"] = "result"
    result: ImageBuilt


class UpdateResult(OperatorModel):
    kind: Literal["result"] = "result"
    result: UpdateOutcome


class RollbackResult(OperatorModel):
    kind: Literal["result"] = "result"
    result: RolledBack


class UpdateAllResult(OperatorModel):
    kind: Literal["result"] = "result"
    result: UpdateAll


BuildItem = Annotated[Progress | BuildResult, Field(discriminator="kind")]
UpdateItem = Annotated[Progress | UpdateResult, Field(discriminator="kind")]
RollbackItem = Annotated[Progress | RollbackResult, Field(discriminator="kind")]
UpdateAllItem = Annotated[Progress | UpdateAllResult, Field(discriminator="kind")]


class ReembedResult(OperatorModel):
    kind: Literal["result"] = "result"
    result: MemoryReembedded


ReembedItem = Annotated[Progress | ReembedResult, Field(discriminator="kind")]
"""`memory.reembed`: `Progress` (phase `reembed`, `step` vectors of `total`) after each page,
and (phase `reembedded`) after each agent's run."""


class BackfillToolsResult(OperatorModel):
    kind: Literal["result"] = "result"
    result: MemoryToolsBackfilled


BackfillToolsItem = Annotated[Progress | BackfillToolsResult, Field(discriminator="kind")]
"""`memory.backfill_tools`: `Progress` (phase `backfill-tools`, `step` sessions of `total`)
after each session, then the result."""
