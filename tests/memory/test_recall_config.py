"""config.json's recall settings (design 004, relevant context each turn): out of range is a
one-line `config check` error with exit 3; 0 tokens (recall off) is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctl.cli import choirctl, snapshot
from tests.memory.test_memory_config import home, write

__all__ = ["home"]


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (
            "recall_budget_tokens",
            -1,
            "recall_budget_tokens: Input should be greater than or equal to 0",
        ),
        (
            "recall_deadline_ms",
            5,
            "recall_deadline_ms: Input should be greater than or equal to 10",
        ),
        (
            "recall_deadline_ms",
            60_000,
            "recall_deadline_ms: Input should be less than or equal to 5000",
        ),
    ],
)
def test_recall_settings_out_of_range_are_refused(
    home: Path, key: str, value: int, problem: str
) -> None:
    write(home, **{key: value})
    before = snapshot(home)
    run = choirctl(home, "config", "check")
    assert run.code == 3
    assert f"  {problem}" in run.err
    assert snapshot(home) == before


def test_recall_off_and_a_longer_deadline_are_valid(home: Path) -> None:
    write(home, recall_budget_tokens=0, recall_deadline_ms=400)
    run = choirctl(home, "config", "check", "--json")
    assert run.code == 0, run.err
