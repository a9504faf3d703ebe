"""Config values that would expose the host or crash choird's readers (issue 11, holes 6 and 7).

Workspaces: a workspace is mounted read-write into the agent's container and emptied by
`workspace reset`; `/`, `/etc`, `/var/run`, `$CHOIR_HOME`, its `socks/`, the Docker socket's
directory and links to any of them must be refused by `config check`, `config load` (nothing
staged) and `workspace reset` alike. Hostile JSON: 100k levels of nesting, a 5,000-digit integer
and friends in config.json, secrets.json, a skill or a tool manifest must be one-line problems
(exit 3), never a traceback or "internal error".
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import run_choirctl
from tests.lifecycle.support import choirctl

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" + "0" * 5000


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params))
    (root / "ws-other").mkdir()
    return home


@pytest.fixture
async def served(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        yield daemon, client


def one_error(done: subprocess.CompletedProcess[str], code: int = 3) -> list[str]:
    """The problem lines of a refused command: exit `code`, no traceback, no internal error."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr
    return [line.strip() for line in done.stderr.strip().splitlines()]


async def staged(client: ChoirClient) -> tuple[object, ...]:
    """What choird runs and has staged: a refused load must change none of it."""
    status = await client.status()
    return status.config_version, status.config_hash, status.config_staged


# -- workspaces ----------------------------------------------------------------------------

DANGEROUS: dict[str, Callable[[ChoirHome], str]] = {
    "root": lambda home: "/",
    "etc": lambda home: "/etc",
    "var-run": lambda home: "/var/run",
    "usr-inside": lambda home: "/usr/local/share/choir-ws",
    "choir-home": lambda home: str(home.root),
    "choir-socks": lambda home: str(home.socks),
    "choir-home-parent": lambda home: str(home.root.parent),
    "all-workspaces": lambda home: str(home.workspaces),
    "home-dir": lambda home: os.path.expanduser("~"),
    "ssh-dir": lambda home: os.path.expanduser("~/.ssh"),
    "docker-socket-dir": lambda home: str(home.root.parent / "engine"),
    "link-to-etc": lambda home: _link(home, "/etc"),
    "link-to-socks": lambda home: _link(home, str(home.socks)),
}


def _link(home: ChoirHome, target: str) -> str:
    link = home.root.parent / "innocent"
    link.symlink_to(target)
    return str(link)


def _set_workspace(home: ChoirHome, path: str) -> None:
    data = read_config(home)
    data["workspaces"]["default"]["path"] = path
    write_config(home, data)


@pytest.mark.parametrize("case", DANGEROUS)
def test_config_check_refuses_a_dangerous_workspace(
    home: ChoirHome, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = DANGEROUS[case](home)
    if case == "docker-socket-dir":
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}/docker.sock")
    _set_workspace(home, path)
    lines = one_error(run_choirctl(home, "config", "check"))
    assert len(lines) == 2, lines  # the header and one problem
    assert lines[-1].startswith(f"workspaces.default.path: {path}")


def test_a_workspace_of_its_own_is_fine(home: ChoirHome, root: Path) -> None:
    for path in (home.workspaces / "mine", root / "projects" / "ws", Path("/var/lib/choir-ws")):
        _set_workspace(home, str(path))
        done = run_choirctl(home, "config", "check")
        assert done.returncode == 0, done.stderr


@pytest.mark.slow
async def test_config_load_refuses_a_workspace_on_the_control_plane_and_stages_nothing(
    served: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = served
    before = await staged(client)
    _set_workspace(daemon.home, str(daemon.home.socks))
    lines = one_error(await choirctl(daemon.home, "config", "load"))
    assert any(line.startswith("workspaces.default.path:") for line in lines), lines
    assert await staged(client) == before


@pytest.mark.slow
async def test_workspace_reset_refuses_a_workspace_swapped_for_a_link(
    served: tuple[ChoirDaemon, ChoirClient], root: Path
) -> None:
    """The configured workspace becomes a link into $CHOIR_HOME after the config was loaded:
    the reset must refuse rather than empty what the link points at."""
    daemon, _ = served
    workspace = Path(daemon.services.stage.running.config.workspaces["other"].path)  # type: ignore[union-attr]
    decoy = daemon.home.root / "sources" / "decoy"
    decoy.mkdir()
    (decoy / "keep.txt").write_text("the operator's")
    os.rmdir(workspace)
    os.symlink(decoy, workspace)
    done = await choirctl(daemon.home, "workspace", "reset", "other", "--yes")
    lines = one_error(done, code=2)  # a config problem sent over the wire: invalid_request
    assert any("(a link to" in line and "$CHOIR_HOME" in line for line in lines), lines
    assert (decoy / "keep.txt").read_text() == "the operator's"


# -- hostile JSON --------------------------------------------------------------------------


def _config_with(home: ChoirHome, key: str, raw: str) -> None:
    """config.json with `key` set to the raw JSON text `raw`."""
    data = read_config(home)
    data[key] = "@@"
    home.config_file.write_text(json.dumps(data).replace('"@@"', raw))


HOSTILE = {
    "deep-nesting": ("heartbeat_interval_ms", DEEP, "nested more than 64 levels"),
    "5000-digit-int": ("heartbeat_interval_ms", HUGE, "number out of range"),
    "int-past-64-bits": ("heartbeat_interval_ms", "1" + "0" * 30, "number out of range"),
    "float-overflow": ("snapshot_every_s", "1e999", "number out of range"),
    "nan": ("snapshot_every_s", "NaN", "number out of range"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_config_check_reports_hostile_json_in_one_line(home: ChoirHome, case: str) -> None:
    key, raw, problem = HOSTILE[case]
    _config_with(home, key, raw)
    lines = one_error(run_choirctl(home, "config", "check"))
    assert problem in lines[-1], lines
    assert len(lines) == 2, lines


@pytest.mark.parametrize("raw", [DEEP, HUGE], ids=["deep-nesting", "5000-digit-int"])
def test_secrets_json_with_hostile_json_is_one_problem(home: ChoirHome, raw: str) -> None:
    home.secrets_file.write_text('{"pg": ' + raw + "}")
    lines = one_error(run_choirctl(home, "config", "check"))
    assert lines[-1].startswith("secrets.json"), lines


@pytest.mark.slow
@pytest.mark.parametrize("case", ["deep-nesting", "5000-digit-int"])
async def test_config_load_reports_hostile_json_and_stages_nothing(
    served: tuple[ChoirDaemon, ChoirClient], case: str
) -> None:
    daemon, client = served
    before = await staged(client)
    key, raw, problem = HOSTILE[case]
    _config_with(daemon.home, key, raw)
    lines = one_error(await choirctl(daemon.home, "config", "load"))
    assert any(problem in line for line in lines), lines
    assert await staged(client) == before


@pytest.mark.slow
@pytest.mark.parametrize("where", ["skills/hostile.json", "tools/hostile.json"])
@pytest.mark.parametrize("raw", [DEEP, HUGE], ids=["deep-nesting", "5000-digit-int"])
async def test_hostile_json_in_a_repo_is_a_problem_of_config_load(
    served: tuple[ChoirDaemon, ChoirClient], where: str, raw: str
) -> None:
    daemon, client = served
    before = await staged(client)
    (daemon.home.sources / "global" / where).write_text('{"name": "hostile", "x": ' + raw + "}")
    lines = one_error(await choirctl(daemon.home, "config", "load"))
    assert any(f"{where.split('/')[0]}" in line and "hostile.json" in line for line in lines)
    assert await staged(client) == before
