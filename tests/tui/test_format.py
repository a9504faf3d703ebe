"""The shared cell formatters read what choird really sends."""

from __future__ import annotations

from tui.widgets.format import image_text


def test_an_agent_image_shows_its_version_not_its_fields() -> None:
    # `agent.status` sends the version.json the agent was started from.
    image = {
        "agent_id": "agent-1",
        "agent_repo_commit": "6de3353e6775fc997120bf33705d547c30a073a1",
        "global_repo_commit": "13a77491c42d054bc110c37dd892664cc835b385",
        "image_version": "6de3353-13a7749",
        "skill_manifest_hash": "460c",
        "tool_manifest_hash": "64cf",
    }
    assert image_text(image) == "6de3353-13a7749"


def test_no_image_is_a_dash() -> None:
    assert image_text(None) == image_text({}) != ""
