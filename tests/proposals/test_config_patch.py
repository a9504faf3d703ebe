"""A proposed config change is checked as `config load` checks config.json, and bound to the
patch together with the values it replaces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from choir.daemon.proposals.config_patch import patched_config
from choir.errors import UsageError
from tests.harness.homes import make_home, read_config


@pytest.fixture
def config(tmp_path: Path) -> dict[str, Any]:
    return read_config(make_home(tmp_path))


def patched(config: dict[str, Any], patch: Any) -> Any:
    return patched_config(json.dumps(config), {"patch": patch}, ["agent-1-git"])


def test_a_loadable_patch_gives_config_json_with_it_and_the_validated_config(
    config: dict[str, Any],
) -> None:
    result = patched(config, {"approval_timeout_ms": 600_000, "event_window_size": None})

    assert result.document["approval_timeout_ms"] == 600_000
    assert "event_window_size" not in result.document
    assert result.config.approval_timeout_ms == 600_000
    assert json.loads(result.text) == result.document


def test_the_hash_binds_the_values_the_patch_replaces_and_nothing_else(
    config: dict[str, Any],
) -> None:
    patch = {"rpc": {"read_timeout_ms": 45_000}}
    bound = patched(config, patch).sha256

    unrelated = {**config, "event_window_size": 60}
    assert patched(unrelated, patch).sha256 == bound  # an edit elsewhere: still what was shown
    moved = {**config, "rpc": {**config.get("rpc", {}), "read_timeout_ms": 40_000}}
    assert patched(moved, patch).sha256 != bound  # the replaced value changed
    assert patched(config, {"rpc": {"read_timeout_ms": 46_000}}).sha256 != bound


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        ({"approval_timeout_ms": "soon"}, "would not load: approval_timeout_ms"),
        ({"no_such_key": 1}, "would not load: "),
        ({}, "no `patch` object"),
        ("not an object", "no `patch` object"),
    ],
    ids=["wrong-type", "unknown-key", "empty", "not-an-object"],
)
def test_a_patch_that_would_not_load_is_refused_naming_the_problem(
    config: dict[str, Any], patch: Any, problem: str
) -> None:
    with pytest.raises(UsageError) as refused:
        patched(config, patch)
    assert problem in refused.value.message


def test_a_patch_that_changes_nothing_is_refused(config: dict[str, Any]) -> None:
    same = config.get("approval_timeout_ms", 1_800_000)
    with pytest.raises(UsageError, match="changes nothing"):
        patched({**config, "approval_timeout_ms": same}, {"approval_timeout_ms": same})
