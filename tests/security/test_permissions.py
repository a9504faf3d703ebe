"""Every file and directory choir creates has the mode the policy below gives it, and starting
choir never widens a mode the operator set.

The run is what an operator does: `choirctl init` in a home whose parent is 0700 (the home
itself made 0700 by the operator on the docker run: a mode to keep); `choir up` (choird in the
background, embedded Postgres in `$CHOIR_HOME/pgdata`, agent-1 on the process runtime (bwrap)
or in Docker), a chat, `choir down`; then choird once more serving HTTPS too
(`--tls-self-signed`, so `tls/` exists), the agent resumed with `choirctl agent start`, a chat
and `choir down`. The whole of `$CHOIR_HOME` — pgdata, sockets, logs, runtime trees, tls,
workspaces — is walked after init, while the agent runs and after each stop, and each entry
is held to the first rule of `POLICY` that matches its path (relative to `$CHOIR_HOME`; `*` is
one path segment, `**` any number). Every ancestor of `$CHOIR_HOME` keeps the mode it had
before the start.

Modes (README "Security"):

| path                               | mode                  | why                               |
|------------------------------------|-----------------------|-----------------------------------|
| `$CHOIR_HOME`                      | 0711 at most          | Postgres (its own user under a    |
|                                    |                       | root choird) traverses to pgdata  |
| config.json, secrets.json, *.lock  | 0600                  | secrets, and who may edit them    |
| socks/, socks/agents/              | 0700                  | the operator API is the operator's|
| socks/agents/<id>/                 | 0711 at most          | traverse-only, choird's           |
| socks/agents/<id>/choird.crt       | not group/world       | a container's agent reads it (a   |
|                                    | writable              | certificate: public)              |
| sockets                            | 0600                  | only choird's uid connects        |
| logs/ and all below                | 0700 dirs, 0600 files | logs quote agents and sessions    |
| pgdata/ and all below              | 0700 dirs, 0600 files | the database (its socket: 0777    |
|                                    |                       | Postgres's own, in 0700 pgdata)   |
| workspaces/, each workspace        | 0700                  | what an agent leaves is its own   |
| runtime/<id>/home, process.json    | 0700 / 0600           | an agent's HOME, its pid record   |
| tls/*.key                          | 0600                  | the HTTPS key                     |
| everything else                    | not group/world       | nobody else may change what       |
|                                    | writable              | choir runs (repos, trees, build)  |

What an agent writes inside its workspace is the agent's own business (it can chmod its files
as it likes); the private workspace directory keeps everyone else out of it.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from choir.home import ChoirHome
from tests.docker_support import require_docker
from tests.harness.homes import short_root
from tests.harness.processes import Choird, run_choirctl, spawn_choird
from tests.lifecycle.test_up_down import choir, processes_of
from tests.runtime.conftest import BUILD_TIMEOUT_S
from tests.security.process_agents import require_bwrap

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]

Mode = Literal["private", "traverse-only", "socket", "agent's", "not writable by others"]


@dataclass(frozen=True)
class Rule:
    pattern: str
    """A path relative to `$CHOIR_HOME` (`` the home itself); `*` one segment, `**` any."""
    mode: Mode
    why: str

    def matches(self, relative: str) -> bool:
        return _compiled(self.pattern).fullmatch(relative) is not None


def _compiled(pattern: str) -> re.Pattern[str]:
    parts = (r"(?:.*)" if part == "**" else re.escape(part).replace(r"\*", "[^/]*")
             for part in pattern.split("/"))  # fmt: skip
    return re.compile("/".join(parts).replace("/(?:.*)", "(?:/.*)?"))


POLICY: tuple[Rule, ...] = (
    Rule("", "traverse-only", "Postgres, run as its own user by a root choird, reaches pgdata"),
    Rule("config.json", "private", "config names what holds secrets; only the operator edits"),
    Rule("secrets.json", "private", "the secrets"),
    Rule("*.lock", "private", "choird's instance lock"),
    Rule("socks", "private", "the operator API is the operator's alone"),
    Rule("socks/agents", "private", "agents' sockets are reached through mounts, not paths"),
    Rule("socks/agents/*", "traverse-only", "an agent's socket directory: choird's"),
    Rule(
        "socks/agents/*/choird.crt",
        "not writable by others",
        "the certificate an agent trusts (public): a container's uid reads it, choird's alone",
    ),
    Rule("socks/**", "socket", "only choird's uid connects"),
    Rule("logs", "private", "logs quote agents, sessions and tool names"),
    Rule("logs/**", "private", "logs quote agents, sessions and tool names"),
    Rule("pgdata/.s.PGSQL.*", "socket", "Postgres's own 0777 socket, in private pgdata"),
    Rule("pgdata", "private", "the database"),
    Rule("pgdata/**", "private", "the database"),
    Rule("workspaces", "private", "what an agent leaves is out of other users' reach"),
    Rule("workspaces/*", "private", "what an agent leaves is out of other users' reach"),
    Rule("workspaces/*/**", "agent's", "the agent's own files, behind its private workspace"),
    Rule("runtime/*/home", "private", "an agent's HOME (git config, its tools' caches)"),
    Rule("runtime/*/home/**", "agent's", "the agent's own files, behind its private HOME"),
    Rule("runtime/*/process.json", "private", "the agent's pid record"),
    Rule("tls/*.key", "private", "the HTTPS private key"),
    Rule("**", "not writable by others", "nobody else may change what choir runs"),
)


def rule_for(relative: str) -> Rule:
    return next(rule for rule in POLICY if rule.matches(relative))


def violation(path: Path, st: os.stat_result, rule: Rule) -> str | None:
    """What is wrong with `path`'s mode under `rule`, or None."""
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or rule.mode == "agent's":
        return None
    wrong = {
        "private": mode & 0o077,
        "traverse-only": mode & 0o066,
        "socket": mode & 0o077 if not _private_dir(path.parent) else 0,
        "not writable by others": mode & 0o022,
    }[rule.mode]
    return f"{oct(mode)} {path} ({rule.mode}: {rule.why})" if wrong else None


def _private_dir(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def walk(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under `root` (itself included), not following symlinks; entries that
    vanish meanwhile (Postgres's temporary files) are skipped."""
    yield root, os.lstat(root)
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            try:
                yield path, os.lstat(path)
            except FileNotFoundError:
                continue


def violations(home: ChoirHome) -> list[str]:
    found = []
    for path, st in walk(home.root):
        relative = "" if path == home.root else str(path.relative_to(home.root))
        problem = violation(path, st, rule_for(relative))
        if problem is not None:
            found.append(problem)
    return found


def assert_policy(home: ChoirHome) -> None:
    found = violations(home)
    assert not found, "modes against the policy:\n" + "\n".join(found)


def ancestors(path: Path) -> dict[Path, int]:
    return {parent: stat.S_IMODE(parent.stat().st_mode) for parent in path.parents}


def test_the_policy_reads_as_the_table_says() -> None:
    assert rule_for("").mode == "traverse-only"
    assert rule_for("socks/agents/agent-1").mode == "traverse-only"
    assert rule_for("socks/agents/agent-1/choir.sock").mode == "socket"
    assert rule_for("logs/archive/agent-1/x.log.gz").mode == "private"
    assert rule_for("pgdata/.s.PGSQL.5432").mode == "socket"
    assert rule_for("pgdata/base/1/112").mode == "private"
    assert rule_for("workspaces/default").mode == "private"
    assert rule_for("workspaces/default/.choirtmp/send").mode == "agent's"
    assert rule_for("repos/agents/agent-1/tools").mode == "not writable by others"
    assert rule_for("tls/choird.key").mode == "private"


@pytest.fixture
def home() -> Iterator[ChoirHome]:
    with short_root("pm-") as root:
        (root / "op").mkdir(mode=0o700)
        yield ChoirHome(root / "op" / "h")


@pytest.mark.parametrize("runtime", ["process", "docker"])
def test_everything_choir_creates_follows_the_policy(home: ChoirHome, runtime: str) -> None:
    if runtime == "process":
        require_bwrap()
    else:
        require_docker()
    init = run_choirctl(home, "init")
    assert init.returncode == 0, init.stderr
    if runtime == "docker":
        home.root.chmod(0o700)  # the operator's choice: start must keep it
    before = ancestors(home.root / "x")
    assert_policy(home)

    # `choir up`: choird in the background, agent-1 started; a chat
    try:
        up = choir(home, "up", "--no-tui", "--runtime", runtime)
        assert up.returncode == 0, up.stdout + up.stderr
        assert_running_and_answering(home, runtime)
        assert_policy(home)  # while the agent runs
        assert ancestors(home.root / "x") == before
    finally:
        down = choir(home, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert_policy(home)  # after the stop

    # choird again, serving agents over HTTPS too (tls/); the agent resumes its session
    daemon = spawn_choird(
        home, "--quiet", "--runtime", runtime,
        "--transport", "http", "--listen", "127.0.0.1:0", "--tls-self-signed",
    )  # fmt: skip
    try:
        wait_answering(home, daemon)
        started = run_choirctl(home, "agent", "start", "agent-1", "--dm", "console")
        assert started.returncode == 0, started.stderr
        assert_running_and_answering(home, runtime)
        assert (home.root / "tls" / "choird.key").exists()
        assert_policy(home)
        assert ancestors(home.root / "x") == before
    finally:
        down = choir(home, "down")
        if daemon.process.poll() is None:
            daemon.process.kill()
        daemon.process.wait(30)
    assert down.returncode == 0, down.stdout + down.stderr
    assert processes_of(home) == []
    assert_policy(home)
    assert ancestors(home.root / "x") == before


def wait_answering(home: ChoirHome, daemon: Choird) -> None:
    """Until choird answers `status` (its log says "ready" from the last run already)."""
    deadline = time.monotonic() + 60
    while run_choirctl(home, "status").returncode != 0:
        assert daemon.process.poll() is None, daemon.stderr_text()
        assert time.monotonic() < deadline, "choird did not answer within 60 s"
        time.sleep(0.2)


def assert_running_and_answering(home: ChoirHome, runtime: str) -> None:
    status = run_choirctl(home, "agent", "status", "agent-1", "--json")
    assert status.returncode == 0, status.stderr
    agent = json.loads(status.stdout)
    assert (agent["state"], agent["runtime"]) == ("running", runtime)
    said = run_choirctl(home, "chat", "agent-1", "hello")
    assert said.returncode == 0, said.stderr


def test_a_home_nobody_else_may_reach_stays_so(home: ChoirHome) -> None:
    """`other` users cannot list the home or read a log, a secret or the workspace."""
    if os.geteuid() != 0:
        pytest.skip("playing another host user needs root")
    home.root.parent.chmod(0o755)  # like /home/<operator>: others may traverse it
    init = run_choirctl(home, "init")
    assert init.returncode == 0, init.stderr
    for target in (home.root, home.logs, home.workspaces, home.socks):
        listed = subprocess.run(
            ["ls", str(target)], user=65534, group=65534, extra_groups=[],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        assert listed.returncode != 0, (target, listed.stdout)
    read = subprocess.run(
        ["cat", str(home.secrets_file)], user=65534, group=65534, extra_groups=[],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert read.returncode != 0
    assert "Permission denied" in read.stderr
