"""`choirctl init` as an operator runs it (§6.2)."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

from choir.config import seeds_dir
from tests.ctl.cli import choirctl, snapshot


def _log(repo: Path) -> list[str]:
    done = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%an <%ae> %s"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_init_into_an_empty_home_passes_config_check(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    init = choirctl(home, "init")
    assert init.code == 0, init.err
    assert "Next steps:" in init.out
    assert "choirctl config check" in init.out
    check = choirctl(home, "config", "check")
    assert check.code == 0, check.err
    assert check.out.startswith("config ok: 1 agent, 1 model, 1 workspace")
    assert check.err == ""


def test_init_writes_the_embedded_defaults(home: Path) -> None:
    config = json.loads((home / "config.json").read_text())
    assert config["postgres"] == {"embedded": True}
    assert config["gateways"] == {"console": {"type": "console"}}
    assert config["dms"]["console"] == {"gateway": "console", "user_id": "operator", "admin": True}
    assert config["models"]["demo"]["provider"] == "scripted"
    assert config["agents"]["agent-1"]["defaults"] == {
        "workspace": "default",
        "llm": "demo",
        "git_identity": "agent-1",
        "dm": "console",
    }
    assert config["heartbeat_interval_ms"] == 5000
    assert config["approval_timeout_ms"] == 1_800_000
    assert config["global_repo"]["url"] == str(home / "sources" / "global")
    workspace = Path(config["workspaces"]["default"]["path"])
    assert (workspace / ".choirtmp" / "send").is_dir()
    assert (workspace / ".choirtmp" / "recv").is_dir()


def test_init_creates_layout_and_private_secrets(home: Path) -> None:
    for directory in ("repos/agents", "socks/agents", "logs/archive"):
        assert (home / directory).is_dir()
    secrets = home / "secrets.json"
    assert json.loads(secrets.read_text()) == {}
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    # traverse-only for others: embedded Postgres runs as its own user when choird is root
    assert stat.S_IMODE(home.stat().st_mode) == 0o711
    assert stat.S_IMODE((home / "socks").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "logs").stat().st_mode) == 0o700


def test_init_materialises_seeds_and_agent_repo_as_git_repos(home: Path) -> None:
    global_repo = home / "sources" / "global"
    seeded = sorted(
        str(p.relative_to(seeds_dir() / "global"))
        for p in (seeds_dir() / "global").rglob("*")
        if p.is_file()
    )
    copied = sorted(
        str(p.relative_to(global_repo))
        for p in global_repo.rglob("*")
        if p.is_file() and ".git" not in p.parts
    )
    assert copied == seeded
    assert _log(global_repo) == ["choir <choir@localhost> choir starter global repo"]
    agent_repo = home / "sources" / "agents" / "agent-1"
    assert (agent_repo / "Dockerfile").read_text().splitlines()[-1] == "FROM choir-base"
    for name in ("identity/SOUL.md", "identity/SOUL-CORE.md", "tools/.gitkeep", "skills/.gitkeep"):
        assert (agent_repo / name).is_file()
    assert _log(agent_repo) == ["choir <choir@localhost> Scaffold agent agent-1"]


def test_init_twice_refuses_and_changes_nothing(home: Path) -> None:
    before = snapshot(home)
    again = choirctl(home, "init")
    assert again.code == 5
    assert again.err == (
        f"error: {home}/config.json already exists: pass --force to overwrite it "
        "(secrets.json is kept)\n"
    )
    assert snapshot(home) == before


def test_init_force_replaces_config_but_keeps_secrets_and_repos(home: Path) -> None:
    assert choirctl(home, "secret", "set", "openrouter-key", "sk-keep-me").code == 0
    secrets_before = (home / "secrets.json").read_bytes()
    (home / "config.json").write_text('{"broken": ')
    commit_file = home / "sources" / "global" / "extra.txt"
    commit_file.write_text("operator's own change\n")
    forced = choirctl(home, "init", "--force", "--json")
    assert forced.code == 0, forced.err
    report = forced.json()
    assert report["config_replaced"] is True
    assert report["secrets_created"] is False
    assert report["global_repo"]["created"] is False
    assert (home / "secrets.json").read_bytes() == secrets_before
    assert commit_file.read_text() == "operator's own change\n"
    assert choirctl(home, "config", "check").code == 0


def test_init_with_custom_global_repo_path(tmp_path: Path) -> None:
    home, global_repo = tmp_path / "home", tmp_path / "elsewhere" / "global"
    run = choirctl(home, "init", "--global-repo", str(global_repo), "--json")
    assert run.code == 0, run.err
    assert run.json()["global_repo"]["path"] == str(global_repo)
    assert (global_repo / ".git").is_dir()
    config = json.loads((home / "config.json").read_text())
    assert config["global_repo"] == {"url": str(global_repo), "ref": "main"}


def test_init_failing_midway_leaves_no_trace(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory must go")
    home = tmp_path / "home"
    run = choirctl(home, "init", "--global-repo", str(blocker / "global"))
    assert run.code == 1
    assert run.err.startswith(f"error: cannot set up {home} (")
    assert run.err.rstrip().endswith("nothing was changed")
    assert not home.exists()


def test_init_failing_midway_keeps_an_existing_home_intact(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "choird.log").write_text("old log line\n")
    home.chmod(0o755)
    blocker = tmp_path / "file"
    blocker.write_text("")
    before = snapshot(home)
    run = choirctl(home, "init", "--global-repo", str(blocker / "global"))
    assert run.code == 1
    assert snapshot(home) == before


def test_init_refuses_an_occupied_repo_path(tmp_path: Path) -> None:
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("not a repo")
    home = tmp_path / "home"
    run = choirctl(home, "init", "--global-repo", str(occupied))
    assert run.code == 5
    assert "is not a git repository" in run.err
    assert not home.exists()
