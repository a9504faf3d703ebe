"""An apply's state machine (pure): `commit → merge → build → update → done`, or `failed`.

A tool (`TOOL_ORDER`, §8.10's two-phase registration) waits after its commit at `implement`
— the manifest and a not-ready stub are on the proposal branch, a human writes the code — and
goes on at `validate` only when the operator registers it (`choirctl tool register`).

Each step is idempotent, so a choird killed in the middle runs the step it was at again on
restart (`resume`). A failure ends in `failed`, naming the step and the reason, with the effects
that put the agent back as it was: a merged commit is reverted (the ref is reset to where it was)
once the build or the update failed, and an agent the update stopped is redeployed on the old
build. Before the merge nothing the agent runs from has changed, so nothing is undone.
The undo is durable (`undo_pending`, cleared by `undone`): a choird killed before it finished
undoing runs the undo again on restart — never the failed step, whose retry would build the
reverted ref and call the proposal applied.

A tool's register (`REGISTER`: validate → update) failing is undone the same way but does not
end the apply: it goes back to `implement`, the failed step and reason kept, so the human fixes
the branch and registers again (`registered` clears them) — the proposal stays approved.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

CONFIG_CHANGE: Final = "config_change"
"""Applied in one go (`executor.ConfigApply`: config.json written, loaded, applied), not by
these steps: nothing to build or deploy, and `config apply` publishes it to the agents."""
TOOL: Final = "tool"
APPLIED_KINDS: Final = frozenset({"skill", CONFIG_CHANGE, TOOL, "repo_change"})
"""Proposal kinds choird applies once approved; the others only tell the agent (issue 17)."""

Step = Literal["commit", "implement", "validate", "merge", "build", "update", "done", "failed"]
ORDER: Final[tuple[Step, ...]] = ("commit", "merge", "build", "update", "done")
TOOL_ORDER: Final[tuple[Step, ...]] = (
    "commit",
    "implement",
    "validate",
    "merge",
    "build",
    "update",
    "done",
)
TERMINAL: Final = frozenset({"done", "failed"})
WAITING: Final = frozenset({"implement"})
"""Steps a human ends (`choirctl tool register`), never choird on its own."""
REGISTER: Final = frozenset({"validate", "merge", "build", "update"})
"""A tool's register: a failure here waits at `implement` again, to be registered again."""


@dataclass(frozen=True)
class ApplyState:
    approval_id: str
    agent_id: str
    step: Step
    branch: str
    base_commit: str | None = None
    """The ref's commit the proposal was committed on."""
    commit_id: str | None = None
    """The proposal's commit on `branch`."""
    merged_from: str | None = None
    """The ref's commit before the merge: what a rollback resets it to."""
    image_id: str | None = None
    """What the build made (an image id, or the process runtime's tree digest)."""
    failed_step: Step | None = None
    reason: str | None = None
    undo_pending: bool = False
    """A failure's undo (`undo`) is not finished: a restarted choird runs it again."""


@dataclass(frozen=True)
class StepDone:
    step: Step
    facts: dict[str, str]
    """What the step learned: `base_commit`, `commit_id`, `merged_from`, `image_id`."""


@dataclass(frozen=True)
class StepFailed:
    step: Step
    reason: str


@dataclass(frozen=True)
class RevertMerge:
    """Reset the configured ref to `merged_from`."""


@dataclass(frozen=True)
class Redeploy:
    """Update the agent again, onto the reverted build, so it runs as it did."""


Outcome = StepDone | StepFailed
Effect = RevertMerge | Redeploy
_FACTS: Final = ("base_commit", "commit_id", "merged_from", "image_id")


def start(approval_id: str, agent_id: str, branch: str) -> ApplyState:
    return ApplyState(approval_id, agent_id, "commit", branch)


def advance(
    state: ApplyState, outcome: Outcome, order: tuple[Step, ...] = ORDER
) -> tuple[ApplyState, list[Effect]]:
    """The state after `outcome` of the current step (in `order`), and what undoes a failure."""
    if state.step in TERMINAL or outcome.step != state.step:
        raise ValueError(f"apply {state.approval_id} is at {state.step}, not {outcome.step}")
    if isinstance(outcome, StepDone):
        facts = outcome.facts
        known = {k: facts.get(k, getattr(state, k)) for k in _FACTS}
        following = order[order.index(state.step) + 1]
        return replace(
            state,
            step=following,
            base_commit=known["base_commit"],
            commit_id=known["commit_id"],
            merged_from=known["merged_from"],
            image_id=known["image_id"],
        ), []
    ended: Step = "implement" if order == TOOL_ORDER and state.step in REGISTER else "failed"
    effects = undo(state)
    failed = replace(
        state,
        step=ended,
        failed_step=state.step,
        reason=outcome.reason,
        undo_pending=bool(effects),
    )
    return failed, effects


def registered(state: ApplyState, commit: str) -> ApplyState:
    """A tool waiting at `implement` registered with the human's `commit`: on at `validate`,
    what a failed register left (its merge base, its image, its failure) forgotten."""
    if state.step != "implement":
        raise ValueError(f"apply {state.approval_id} is at {state.step}, not implement")
    return replace(
        state,
        step="validate",
        commit_id=commit,
        merged_from=None,
        image_id=None,
        failed_step=None,
        reason=None,
        undo_pending=False,
    )


def undo(state: ApplyState) -> list[Effect]:
    """What puts the agent back after a failure at `state.step`."""
    if state.step in TERMINAL or state.step in WAITING:  # a failed state: its undo again
        if not state.undo_pending or state.failed_step is None:
            return []
        state = replace(state, step=state.failed_step)
    effects: list[Effect] = []
    if state.step in ("build", "update") and state.merged_from is not None:
        effects.append(RevertMerge())
    if state.step == "update":
        effects.append(Redeploy())
    return effects


def undone(state: ApplyState) -> ApplyState:
    """`state` once its failure's undo has run."""
    return replace(state, undo_pending=False)


def resume(state: ApplyState) -> Step | None:
    """The step a restarted choird runs again (every step is idempotent); None when finished
    or waiting for a human."""
    return None if state.step in TERMINAL or state.step in WAITING else state.step
