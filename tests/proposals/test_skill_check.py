"""A proposed skill is checked as the loader checks it, and becomes one canonical file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from choir.daemon.proposals.skill import safe_repo_path, skill_file
from choir.errors import UsageError
from tests.harness.proposals import TRIAGE

TOOLS = {"choir.fs.read", "choir.skill.transition"}


def test_a_valid_skill_becomes_skills_name_json_whatever_the_key_order() -> None:
    shuffled: dict[str, Any] = dict(reversed(list(TRIAGE.items())))
    first = skill_file({"spec": TRIAGE}, TOOLS)
    second = skill_file({"spec": shuffled, "rationale": "x"}, TOOLS)

    assert first.path == "skills/triage.json"
    assert first.content == second.content  # jsonb reorders keys: the hash must not care
    assert first.sha256 == second.sha256
    assert json.loads(first.content)["name"] == "triage"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({**TRIAGE, "initial_state": "nowhere"}, "initial_state"),
        (
            {
                **TRIAGE,
                "states": {
                    **TRIAGE["states"],
                    "sort": {**TRIAGE["states"]["sort"], "allowed_tools": ["choir.fs.wrte"]},
                },
            },
            "unknown tool 'choir.fs.wrte'",
        ),
        ({**TRIAGE, "name": "../escape"}, "name"),
        ("not an object", "no `spec` object"),
    ],
    ids=["bad-state", "unknown-tool", "bad-name", "not-an-object"],
)
def test_a_skill_that_would_not_load_is_refused_with_the_reason(spec: Any, problem: str) -> None:
    with pytest.raises(UsageError, match=r"would not load|no `spec`") as refused:
        skill_file({"spec": spec}, TOOLS)
    assert problem in refused.value.message


@pytest.mark.parametrize(
    "path", ["../x.json", "/etc/passwd", "skills/../../x", ".git/config", "~/x", "a\\b", ""]
)
def test_a_path_that_could_leave_the_repo_is_refused(path: str) -> None:
    with pytest.raises(UsageError, match="proposed path"):
        safe_repo_path(path)


def test_a_path_inside_the_repo_is_kept() -> None:
    assert safe_repo_path("skills/triage.json") == "skills/triage.json"
