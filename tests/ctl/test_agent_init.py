"""`choirctl agent init` (§17.8): a placeholder entry, the rest of config.json untouched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from choir.config import AGENT_ID_PATTERN
from tests.ctl.cli import choirctl, snapshot

PLACEHOLDERS = {
    "workspace": "",
    "llm": "",
    "voice_profile": "",
    "git_identity": "",
    "notion": "",
    "email": "",
    "dm": "",
}


def _config(home: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "config.json").read_text())
    return data


def _commits(repo: Path) -> list[str]:
    done = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_agent_init_adds_placeholders_that_config_check_accepts(home: Path) -> None:
    run = choirctl(home, "agent", "init", "agent-2")
    assert run.code == 0, run.err
    repo = home / "sources" / "agents" / "agent-2"
    assert _config(home)["agents"]["agent-2"] == {
        "repo": {"url": str(repo), "ref": "main"},
        "defaults": PLACEHOLDERS,
    }
    check = choirctl(home, "config", "check")
    assert check.code == 0, check.err
    assert check.err.splitlines() == [
        f"warning: agents.agent-2.defaults.{key}: not set (set it before starting the agent)"
        for key in ("workspace", "llm", "git_identity", "dm")
    ]


def test_agent_init_scaffolds_a_git_repo(home: Path) -> None:
    assert choirctl(home, "agent", "init", "agent-2").code == 0
    repo = home / "sources" / "agents" / "agent-2"
    files = sorted(
        str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
    )
    assert files == [
        "Dockerfile",
        "identity/SOUL-CORE.md",
        "identity/SOUL.md",
        "skills/.gitkeep",
        "tools/.gitkeep",
    ]
    assert "FROM choir-base" in (repo / "Dockerfile").read_text().splitlines()
    assert _commits(repo) == ["Scaffold agent agent-2"]


def test_agent_init_keeps_the_rest_of_the_file_intact(home: Path) -> None:
    original = (home / "config.json").read_text()
    hand_edited = original.replace(
        '"console": {\n      "type": "console"\n    }', '"console": { "type": "console" }'
    )
    assert hand_edited != original
    (home / "config.json").write_text(hand_edited)
    assert choirctl(home, "agent", "init", "agent-2", "--llm", "demo").code == 0
    edited = (home / "config.json").read_text()
    start = edited.index(',\n    "agent-2": {')
    end = edited.index("\n    }", start) + len("\n    }")
    assert edited[:start] + edited[end:] == hand_edited
    assert list(_config(home)) == list(json.loads(hand_edited))


def test_agent_init_with_flags_fills_defaults(home: Path) -> None:
    run = choirctl(
        home,
        "agent", "init", "agent-2",
        "--workspace", "default", "--llm", "demo", "--git-identity", "agent-1", "--dm", "console",
        "--json",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert run.json()["unset_defaults"] == []
    defaults = _config(home)["agents"]["agent-2"]["defaults"]
    assert defaults == PLACEHOLDERS | {
        "workspace": "default",
        "llm": "demo",
        "git_identity": "agent-1",
        "dm": "console",
    }
    assert choirctl(home, "config", "check").code == 0


@pytest.mark.parametrize(
    ("args", "code", "error"),
    [
        (
            ("Agent-2",),
            2,
            "invalid agent id 'Agent-2': must match ^[a-z][a-z0-9_-]{0,30}$",
        ),
        (("a" * 32,), 2, f"invalid agent id '{'a' * 32}': must match {AGENT_ID_PATTERN}"),
        (("agent-1",), 5, "agent 'agent-1' already exists in {home}/config.json"),
        (
            ("agent-2", "--llm", "sonet", "--dm", "nobody"),
            2,
            "--llm: unknown model 'sonet' (known: demo); "
            "--dm: unknown DM 'nobody' (known: console)",
        ),
    ],
    ids=["uppercase", "too-long", "exists", "unknown-names"],
)
def test_agent_init_refusals_change_nothing(
    home: Path, args: tuple[str, ...], code: int, error: str
) -> None:
    before = snapshot(home)
    run = choirctl(home, "agent", "init", *args)
    assert run.code == code
    assert run.err == f"error: {error.replace('{home}', str(home))}\n"
    assert snapshot(home) == before


def test_agent_init_with_a_remote_repo_prints_instructions(home: Path) -> None:
    url = "git@github.com:org/choir-agent-2.git"
    run = choirctl(home, "agent", "init", "agent-2", "--repo", url)
    assert run.code == 0, run.err
    assert f"create an empty repository at {url}" in run.out
    assert _config(home)["agents"]["agent-2"]["repo"] == {"url": url, "ref": "main"}
    assert not (home / "sources" / "agents" / "agent-2").exists()


def test_agent_init_with_a_local_path(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "repos" / "agent-2"
    run = choirctl(home, "agent", "init", "agent-2", "--repo", str(target))
    assert run.code == 0, run.err
    assert _commits(target) == ["Scaffold agent agent-2"]
    assert _config(home)["agents"]["agent-2"]["repo"]["url"] == str(target)


def test_agent_init_reuses_an_existing_repo(home: Path) -> None:
    existing = home / "sources" / "agents" / "agent-1"
    before = snapshot(existing)
    run = choirctl(home, "agent", "init", "agent-2", "--repo", str(existing), "--json")
    assert run.code == 0, run.err
    assert run.json()["repo_created"] is False
    assert snapshot(existing) == before


def test_agent_init_refuses_an_occupied_directory(home: Path, tmp_path: Path) -> None:
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "file.txt").write_text("x")
    before = snapshot(home)
    run = choirctl(home, "agent", "init", "agent-2", "--repo", str(occupied))
    assert run.code == 5
    assert run.err == (
        f"error: {occupied} exists and is not a git repository: empty it or pass another --repo\n"
    )
    assert snapshot(home) == before


def test_agent_init_failing_midway_leaves_no_trace(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    before = snapshot(home)
    run = choirctl(home, "agent", "init", "agent-2", "--repo", str(blocker / "agent-2"))
    assert run.code == 1
    assert "nothing was changed" in run.err
    assert snapshot(home) == before


def test_agent_init_on_malformed_config_reports_it(home: Path) -> None:
    (home / "config.json").write_text("{")
    before = snapshot(home)
    run = choirctl(home, "agent", "init", "agent-2")
    assert run.code == 3
    assert run.err.splitlines() == [
        "error: config.json cannot be edited:",
        "  config.json: invalid JSON at line 1, column 2: "
        "Expecting property name enclosed in double quotes",
    ]
    assert snapshot(home) == before
