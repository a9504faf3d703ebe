"""Manifest hashes recorded in /choir/version.json and sent at INIT_HELLO (§15.1)."""

from __future__ import annotations

import json
from pathlib import Path

from choir.protocol import SkillSpec, ToolManifest, skill_manifest_hash, tool_manifest_hash

SEEDS = Path(__file__).resolve().parents[2] / "seeds" / "global"
TOOLS = [
    ToolManifest.model_validate_json(p.read_text()) for p in sorted(SEEDS.glob("tools/*.json"))
]
SKILLS = [SkillSpec.model_validate_json(p.read_text()) for p in sorted(SEEDS.glob("skills/*.json"))]


def test_tool_hash_ignores_order_and_file_formatting():
    reparsed = [ToolManifest.model_validate(json.loads(tool.model_dump_json())) for tool in TOOLS]

    assert tool_manifest_hash(reversed(reparsed)) == tool_manifest_hash(TOOLS)
    assert len(tool_manifest_hash(TOOLS)) == 64


def test_tool_hash_changes_when_a_manifest_changes():
    changed = TOOLS[0].model_copy(
        update={"runtime": TOOLS[0].runtime.model_copy(update={"timeout_ms": 1})}
    )

    assert tool_manifest_hash([changed, *TOOLS[1:]]) != tool_manifest_hash(TOOLS)


def test_skill_hash_depends_on_the_skill_set():
    assert skill_manifest_hash(SKILLS) == skill_manifest_hash(reversed(SKILLS))
    assert skill_manifest_hash(SKILLS[:1]) != skill_manifest_hash(SKILLS)
