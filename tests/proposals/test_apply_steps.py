"""The apply's state machine (`choir.daemon.proposals.steps`): every (state, outcome) pair."""

from __future__ import annotations

from dataclasses import replace

import pytest

from choir.daemon.proposals.steps import (
    ApplyState,
    Redeploy,
    RevertMerge,
    Step,
    StepDone,
    StepFailed,
    advance,
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
