"""The starter global repo in seeds/ must load exactly as choir-agent will load it (§8.8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir.protocol import SkillSpec, ToolManifest
from choir.protocol.tooling.manifest import META_PREFIX

SEEDS = Path(__file__).resolve().parents[1] / "seeds"
GLOBAL = SEEDS / "global"
TOOL_FILES = sorted((GLOBAL / "tools").glob("*.json"))
SKILL_FILES = sorted((GLOBAL / "skills").glob("*.json"))

BUILTIN_TOOLS = {
    "choir.exec": [("workspace", "X")],
    "choir.fs.read": [("file:{path}", "S")],
    "choir.fs.write": [("file:{path}", "X")],
    "choir.fs.search": [("file:{path}", "S")],
    "choir.tts.speak": [("choirtmp", "X")],
    "choir.web.search": [],
    "choir.web.browse": [("browser_tab", "X")],
    "choir.notion.query": [],
    "choir.email.send": [],
    "choir.email.receive": [],
    "choir.email.check": [],
    "choir.memory.query": [],
    "choir.memory.upsert": [],
    "choir.memory.compact": [],
}
"""§8.7's table with §9.5's default lock policy."""
HOST_TOOLS = {"choir.web.browse", "choir.memory.query", "choir.memory.upsert"}
CORE_TOOLS = {"choir.core.spawn", "choir.core.inject", "choir.core.cancel", "choir.core.list"}
REPORT_TOOL = "choir.core.report"
"""The core job's own channel to edge (§12.7): for core lanes only."""
META_TOOLS = {
    "choir.propose.tool",
    "choir.propose.skill",
    "choir.propose.config_change",
    "choir.propose.repo_change",
}


def _tools() -> dict[str, ToolManifest]:
    return {path.stem: ToolManifest.model_validate_json(path.read_text()) for path in TOOL_FILES}


def test_every_json_file_under_seeds_global_is_a_tool_or_a_skill():
    every = set(GLOBAL.rglob("*.json"))

    assert every == set(TOOL_FILES) | set(SKILL_FILES)


@pytest.mark.parametrize("path", TOOL_FILES, ids=lambda path: path.stem)
def test_tool_manifest_parses_and_is_named_after_its_file(path: Path):
    manifest = ToolManifest.model_validate_json(path.read_text())

    assert manifest.name == path.stem
    assert len(manifest.llm.description) >= 80, "describe the tool well enough for a model"


def test_seed_tools_are_exactly_the_builtin_core_and_meta_tools():
    assert set(_tools()) == set(BUILTIN_TOOLS) | CORE_TOOLS | {REPORT_TOOL} | META_TOOLS


@pytest.mark.parametrize(("name", "locks"), BUILTIN_TOOLS.items())
def test_builtin_tool_locks_follow_the_default_policy(name: str, locks: list[tuple[str, str]]):
    manifest = _tools()[name]

    assert [(lock.resource, lock.mode) for lock in manifest.runtime.locks] == locks
    expected = "host" if name in HOST_TOOLS else "builtin"
    assert manifest.runtime.implementation == expected


def test_core_tools_are_for_edge_and_meta_tools_are_lock_free_proposals():
    tools = _tools()

    assert {tools[name].runtime.exposure for name in CORE_TOOLS} == {"edge"}
    report = tools[REPORT_TOOL].runtime
    assert (report.exposure, report.side_effect, report.locks) == ("core", "none", [])
    for name in META_TOOLS:
        assert name.startswith(META_PREFIX)
        assert tools[name].runtime.meta
        assert tools[name].runtime.locks == []


def test_fs_read_schema_accepts_the_documented_modes():
    read = _tools()["choir.fs.read"]

    assert (
        read.input_problems({"path": "a.py", "mode": "range", "start_line": 1, "end_line": 9}) == []
    )
    assert read.input_problems({"path": "a.py", "mode": "middle"}) != []


@pytest.mark.parametrize("path", SKILL_FILES, ids=lambda path: path.stem)
def test_skill_parses_names_its_file_and_uses_only_seed_tools(path: Path):
    spec = SkillSpec.model_validate_json(path.read_text())

    assert spec.name == path.stem
    assert spec.unknown_tools(set(_tools())) == []


def test_builtin_skills_of_section_10_3_are_present():
    assert {path.stem for path in SKILL_FILES} == {"tool-builder", "skill-builder"}


@pytest.mark.parametrize("name", ["USER.md", "SOUL.md", "SOUL-CORE.md"])
def test_identity_templates_exist(name: str):
    text = (GLOBAL / "identity" / name).read_text()

    assert text.startswith("# ")
    assert len(text.splitlines()) > 10


def test_example_config_is_the_section_6_3_example():
    config = json.loads((SEEDS / "config.example.json").read_text())

    assert config["agents"]["agent-1"]["defaults"]["workspace"] == "main-ws"
    assert set(config) >= {"global_repo", "models", "agents", "dms", "postgres", "gateways"}
