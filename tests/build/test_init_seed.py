"""`choirctl init` makes the global repo from `seeds/global`, Dockerfile.base included (§6.5)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from choir.config import init_home
from choir.config.scaffolding.gitrepo import git
from choir.daemon.images import dockerfile
from choir.home import ChoirHome

REPO = Path(__file__).resolve().parents[2]


def test_init_commits_the_seeded_global_repo_with_choirs_dockerfile_base(tmp_path):
    home = ChoirHome(tmp_path / "home")

    init_home(home)

    global_repo = home.sources / "global"
    tracked = set(git(global_repo, "ls-files").split())
    seeded = {
        path.relative_to(REPO / "seeds" / "global").as_posix()
        for path in (REPO / "seeds" / "global").rglob("*")
        if path.is_file()
    }
    assert tracked == seeded
    assert "Dockerfile.base" in tracked
    copied = global_repo / "Dockerfile.base"
    assert not copied.is_symlink(), "the repo holds the file, not a link into choir's tree"
    assert copied.read_text() == (REPO / "dockerfiles" / "Dockerfile.base").read_text()
    assert git(global_repo, "status", "--porcelain") == ""
    agent_dockerfile = (home.sources / "agents" / "agent-1" / "Dockerfile").read_text()
    assert dockerfile.problems(agent_dockerfile, agent=True) == []


def test_the_choir_wheel_carries_the_seeds_with_dockerfile_base(wheelhouse):
    [wheel] = (wheelhouse / "choir").glob("choir-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        base = archive.read("choir/_seeds/global/Dockerfile.base").decode()

    assert "choir/_seeds/global/tools/choir.exec.json" in names
    assert base == (REPO / "dockerfiles" / "Dockerfile.base").read_text()
