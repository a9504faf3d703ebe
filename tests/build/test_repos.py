"""Repos (§6.5): local trees read in place, URLs cloned into $CHOIR_HOME/repos and fetched;
an unreachable remote is a warning and a stale clone, never an error once cloned."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from choir.config import load_home
from choir.config.model import RepoRef
from choir.config.scaffolding.gitrepo import git, git_env
from choir.daemon.images import repos
from choir.errors import UsageError
from choir.home import ChoirHome
from tests.build.support import (
    bare_remote,
    commit,
    make_home,
    make_repo,
    move_away,
    push,
    set_repo,
)


@pytest.fixture
def home(tmp_path: Path) -> ChoirHome:
    home = ChoirHome(tmp_path / "home")
    home.create_directories()
    return home


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A working repository with one commit on main."""
    make_repo(tmp_path / "work", {"tools/.gitkeep": "", "README.md": "v1\n"})
    return tmp_path / "work"


def test_a_local_path_is_read_in_place_and_marked_dirty_with_uncommitted_work(home, work):
    head = git(work, "rev-parse", "HEAD").strip()

    clean = repos.checkout(home, repos.GLOBAL, RepoRef(url=str(work)))
    (work / "README.md").write_text("edited\n")
    dirty = repos.checkout(home, repos.GLOBAL, RepoRef(url=str(work)))

    assert (clean.path, clean.commit, clean.local, clean.stale) == (work, head, True, False)
    assert dirty.commit == f"{head}+dirty"
    assert not (home.repos / "global").exists(), "local repos are never cloned"


def test_a_file_url_is_cloned_into_the_cache_and_checked_out_at_its_ref(home, work, tmp_path):
    url = bare_remote(work, tmp_path / "remote.git")
    first = git(work, "rev-parse", "HEAD").strip()

    done = repos.checkout(home, "agents/a1", RepoRef(url=url, ref="main"))

    assert done.path == home.repos / "agents" / "a1"
    assert (done.commit, done.local, done.stale, done.warning) == (first, False, False, None)
    assert (done.path / "README.md").read_text() == "v1\n"
    state = repos.repo_states(home)["agents/a1"]
    assert (state["commit"], state["stale"], state["url"]) == (first, False, url)


def test_new_commits_are_fetched_and_tags_and_commits_work_as_refs(home, work, tmp_path):
    url = bare_remote(work, tmp_path / "remote.git")
    first = git(work, "rev-parse", "HEAD").strip()
    git(work, "tag", "v1")
    repos.checkout(home, repos.GLOBAL, RepoRef(url=url))
    second = commit(work, {"README.md": "v2\n"})
    git(work, "push", "--quiet", "--tags", url, "HEAD:refs/heads/main")

    def readme(ref: str) -> tuple[str, str]:
        done = repos.checkout(home, repos.GLOBAL, RepoRef(url=url, ref=ref))
        return done.commit, (done.path / "README.md").read_text()

    assert readme("main") == (second, "v2\n")
    assert readme("v1") == (first, "v1\n")
    assert readme(second[:10]) == (second, "v2\n")


def test_an_unreachable_remote_leaves_a_stale_clone_and_a_warning(home, work, tmp_path):
    remote = tmp_path / "remote.git"
    url = bare_remote(work, remote)
    good = repos.checkout(home, repos.GLOBAL, RepoRef(url=url))
    hidden = move_away(remote)

    stale = repos.checkout(home, repos.GLOBAL, RepoRef(url=url))

    assert stale.stale is True
    assert stale.commit == good.commit, "the previous checkout stays usable"
    assert stale.warning is not None
    assert stale.warning.startswith(f"fetch from {url} failed (")
    assert stale.warning.endswith(f"using the stale clone at {good.commit[:7]}")
    state = repos.repo_states(home)["global"]
    assert state["stale"] is True
    assert "does not appear to be a git repository" in state["error"]

    move_away(hidden).rename(remote)  # reachable again
    fresh = repos.checkout(home, repos.GLOBAL, RepoRef(url=url))
    assert (fresh.stale, fresh.warning) == (False, None)
    assert repos.repo_states(home)["global"]["stale"] is False


def test_a_checkout_without_fetch_reports_the_recorded_staleness(home, work, tmp_path):
    remote = tmp_path / "remote.git"
    url = bare_remote(work, remote)
    repos.checkout(home, repos.GLOBAL, RepoRef(url=url))
    move_away(remote)
    repos.checkout(home, repos.GLOBAL, RepoRef(url=url))

    unfetched = repos.checkout(home, repos.GLOBAL, RepoRef(url=url), fetch=False)

    assert (unfetched.stale, unfetched.warning) == (True, None)


def test_a_remote_never_cloned_and_unreachable_is_an_error(home, tmp_path):
    url = f"file://{tmp_path}/nowhere.git"

    pattern = r"^global_repo\.url file://.*nowhere\.git cannot be cloned \(.*\): fix the URL"
    with pytest.raises(UsageError, match=pattern):
        repos.checkout(home, repos.GLOBAL, RepoRef(url=url))

    assert not (home.repos / "global").exists()
    assert repos.repo_states(home)["global"]["stale"] is True


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", r"global_repo\.url is empty: set it to a git URL or a local repository path"),
        ("relative/repo", r"global_repo\.url 'relative/repo' is a relative path: make it absolute"),
        ("/no/such/dir", r"global_repo\.url '/no/such/dir' is not a directory"),
    ],
)
def test_bad_urls_are_refused_with_the_fix(home, url, message):
    with pytest.raises(UsageError, match=message):
        repos.checkout(home, repos.GLOBAL, RepoRef(url=url))


def test_an_unknown_ref_is_refused_naming_it(home, work, tmp_path):
    url = bare_remote(work, tmp_path / "remote.git")

    pattern = r"^agents\.a1\.repo\.ref 'nope' is not a branch, tag or commit of file://.*: fix it$"
    with pytest.raises(UsageError, match=pattern):
        repos.checkout(home, "agents/a1", RepoRef(url=url, ref="nope"))


def test_a_changed_url_is_followed(home, work, tmp_path):
    first_url = bare_remote(work, tmp_path / "one.git")
    repos.checkout(home, repos.GLOBAL, RepoRef(url=first_url))
    other = tmp_path / "other"
    other_head = make_repo(other, {"OTHER.md": "other\n"})
    second_url = bare_remote(other, tmp_path / "two.git")

    moved = repos.checkout(home, repos.GLOBAL, RepoRef(url=second_url))

    assert moved.commit == other_head
    assert (moved.path / "OTHER.md").is_file()
    assert not (moved.path / "README.md").exists()


def test_passwords_in_urls_never_reach_messages():
    url = "https://operator:s3cret-token@git.example.org/choir/global.git"

    assert repos.display_url(url) == "https://git.example.org/choir/global.git"
    assert repos.is_local("/srv/repos/global") is True
    assert repos.is_local("git@github.com:org/repo.git") is False
    assert repos.is_local("file:///srv/repos/global") is False


def test_checkouts_fetches_every_repo_and_collects_warnings(tmp_path):
    home, agent_id = make_home(tmp_path)
    local_global = Path(load_home(home).config.global_repo.url)
    remote = tmp_path / "global.git"
    set_repo(home, None, bare_remote(local_global, remote))
    config = load_home(home).config
    found, warnings = repos.checkouts(home, config)
    assert [c.key for c in found] == ["global", f"agents/{agent_id}"]
    assert warnings == []
    commit(local_global, {"identity/USER.md": "changed\n"})
    push(local_global, f"file://{remote}")
    move_away(remote)

    found, warnings = repos.checkouts(home, config)

    assert [c.stale for c in found] == [True, False]
    assert len(warnings) == 1
    assert warnings[0].startswith("repo global: fetch from file://")


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("git.example.org:8443", "username=bot\npassword=t0k/en\n"),
        ("elsewhere.example.org", ""),  # a redirect to another host gets nothing
    ],
)
def test_an_https_urls_credentials_reach_git_only_through_its_helper(asked, answered):
    env = repos.remote_env("https://bot:t0k%2Fen@git.example.org:8443/team/agent.git")
    assert "t0k" not in repos.display_url("https://bot:t0k%2Fen@git.example.org:8443/x")
    done = subprocess.run(
        ["git", "credential", "fill"],
        input=f"protocol=https\nhost={asked}\n\n",
        env=git_env(**env),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [
        line for line in done.stdout.splitlines() if line.split("=")[0] in ("username", "password")
    ]
    assert "".join(f"{line}\n" for line in lines) == answered


def test_a_url_without_credentials_gets_no_helper():
    assert repos.remote_env("https://git.example.org/team/agent.git") == repos.REMOTE_ENV
    assert repos.remote_env("git@git.example.org:team/agent.git") == repos.REMOTE_ENV
