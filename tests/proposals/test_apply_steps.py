"""The apply's state machine (`choir.daemon.proposals.steps`): every (state, outcome) pair."""

from __future__ import annotations

from dataclasses import replace

import pytest

from choir.daemon.proposals.steps import (
    TOOL_ORDER,
    ApplyState,
    Redeploy,
    RevertMerge,
    Step,
    StepDone,
    StepFailed,
    advance,
    registered,
    resume,
    start,
)

FRESH = start("ap-1", "agent-1", "proposal/s-1/triage")
MERGED = replace(FRESH, step="build", base_commit="b0", commit_id="c1", merged_from="b0")


def test_a_fresh_apply_commits_first() -> None:
    assert (FRESH.step, resume(FRESH)) == ("commit", "commit")


@pytest.mark.parametrize(
    ("step", "facts", "following"),
    [
        ("commit", {"base_commit": "b0", "commit_id": "c1"}, "merge"),
        ("merge", {"merged_from": "b0"}, "build"),
        ("build", {"image_id": "img"}, "update"),
        ("update", {}, "done"),
    ],
)
def test_each_step_done_moves_to_the_next_and_keeps_what_it_learned(
    step: str, facts: dict[str, str], following: str
) -> None:
    state = replace(FRESH, step=step)  # type: ignore[arg-type]
    after, effects = advance(state, StepDone(step, facts))  # type: ignore[arg-type]
    assert (after.step, effects) == (following, [])
    assert all(getattr(after, key) == value for key, value in facts.items())


@pytest.mark.parametrize(
    ("state", "effects"),
    [
        (FRESH, []),  # nothing the agent runs from changed yet
        (replace(FRESH, step="merge", commit_id="c1"), []),  # a conflict moved no ref
        (MERGED, [RevertMerge()]),
        (replace(MERGED, step="update", image_id="img"), [RevertMerge(), Redeploy()]),
    ],
    ids=["commit", "merge", "build", "update"],
)
def test_a_failure_ends_failed_naming_the_step_and_undoes_what_was_done(
    state: ApplyState, effects: list[object]
) -> None:
    after, undo = advance(state, StepFailed(state.step, "it broke"))
    assert (after.step, after.failed_step, after.reason) == ("failed", state.step, "it broke")
    assert undo == effects
    assert resume(after) is None


def test_a_finished_apply_takes_no_more_outcomes_and_an_outcome_must_be_for_its_step() -> None:
    done = replace(MERGED, step="done")
    with pytest.raises(ValueError, match="is at done"):
        advance(done, StepDone("update", {}))
    with pytest.raises(ValueError, match="is at build, not merge"):
        advance(MERGED, StepDone("merge", {}))


def test_a_restart_runs_the_step_it_was_at_again() -> None:
    steps: tuple[Step, ...] = ("commit", "merge", "build", "update")
    assert [resume(replace(FRESH, step=step)) for step in steps] == list(steps)


@pytest.mark.parametrize(
    ("step", "effects"),
    [
        ("validate", []),
        ("merge", []),
        ("build", [RevertMerge()]),
        ("update", [RevertMerge(), Redeploy()]),
    ],
)
def test_a_failed_register_is_undone_and_waits_at_implement_to_be_registered_again(
    step: Step, effects: list[object]
) -> None:
    state = replace(MERGED, step=step, image_id="img")
    after, undo = advance(state, StepFailed(step, "it broke"), TOOL_ORDER)
    assert (after.step, after.failed_step, after.reason) == ("implement", step, "it broke")
    assert after.merged_from == "b0"  # what the revert resets the ref to
    assert undo == effects
    assert resume(after) is None  # a human registers again, never choird on its own
    again = registered(after, "c2")
    assert (again.step, again.commit_id, resume(again)) == ("validate", "c2", "validate")
    assert (again.merged_from, again.image_id, again.failed_step, again.reason) == (None,) * 4
    assert again.base_commit == "b0"


def test_a_tools_phase_one_commit_failing_still_ends_failed() -> None:
    after, _ = advance(FRESH, StepFailed("commit", "no repo"), TOOL_ORDER)
    assert (after.step, after.failed_step) == ("failed", "commit")
    with pytest.raises(ValueError, match="is at failed, not implement"):
        registered(after, "c2")
