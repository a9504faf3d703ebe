"""`choirctl agent build` through a real choird (the `agent.build` verb), and the repo fetch of
`config load` with its warnings, errors and the staleness `status` shows."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.protocol.operator.items import Progress
from choir.store.postgres.target import ConnectParams
from tests.build.conftest import remove_agent_images
from tests.build.support import bare_remote, commit, move_away, tool
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import BIN, environment

pytestmark = pytest.mark.timeout(900)


def _home(root: Path, pg_params: ConnectParams) -> tuple[ChoirHome, str]:
    """An e2e home on the test's database whose agent-1 is renamed to a test-unique id."""
    home = make_home(root, postgres=external_postgres(pg_params))
    data = read_config(home)
    agent_id = f"bv-{uuid.uuid4().hex[:8]}"
    data["agents"][agent_id] = data["agents"].pop("agent-1")
    write_config(home, data)
    return home, agent_id


@pytest.fixture
def docker_home(
    root: Path,
    pg_params: ConnectParams,
    wheelhouse: Path,
    global_remote: str,
    docker_sdk: docker.DockerClient,
) -> Iterator[tuple[ChoirHome, str]]:
    home, agent_id = _home(root, pg_params)
    data = read_config(home)
    data["global_repo"]["url"] = global_remote
    write_config(home, data)
    try:
        yield home, agent_id
    finally:
        remove_agent_images(docker_sdk, agent_id)


async def choirctl(home: ChoirHome, *args: str) -> tuple[int, str, str]:
    """`choirctl args` as a process (choird answers on this test's event loop)."""
    process = await asyncio.create_subprocess_exec(
        str(BIN / "choirctl"),
        *args,
        env=environment(CHOIR_HOME=str(home.root), COLUMNS="200"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 600)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.slow
async def test_agent_build_streams_its_steps_and_choirctl_prints_them(docker_home):
    home, agent_id = docker_home
    items: list[Progress] = []
    async with (
        running_daemon(home) as _,
        await ChoirClient.connect(home, call_timeout=None) as client,
    ):
        result = await client.agent_build(agent_id, items.append)
        code, out, err = await choirctl(home, "agent", "build", agent_id)
        json_code, json_out, json_err = await choirctl(home, "agent", "build", agent_id, "--json")

    assert result.built is True
    assert result.tag.startswith(f"choir-agent-{agent_id}:")
    assert result.version.agent_id == agent_id
    steps = [item.step for item in items if item.log is None]
    assert sorted(set(steps)) == list(range(1, 11))
    assert {(item.kind, item.total, item.agent_id) for item in items} == {
        ("progress", 10, agent_id)
    }
    assert any(item.log for item in items), "docker build output is streamed"

    assert code == 0, err
    assert out == f"{agent_id}: {result.tag} up to date ({result.image_id[7:19]})\n"
    assert "[1/10] read the agent definition: " in err
    assert f"[6/10] agent image (the agent repo's Dockerfile): up to date: {result.tag}" in err
    assert "[10/10] done: not started" in err

    assert (json_code, json_err) == (0, "")
    answer = json.loads(json_out)
    assert (answer["built"], answer["tag"], answer["version"]) == (
        False,
        result.tag,
        result.version.model_dump(mode="json"),
    )


@pytest.mark.slow
async def test_a_failing_build_exits_1_with_its_log_tail_and_bad_input_is_named(docker_home):
    home, agent_id = docker_home
    repo = Path(read_config(home)["agents"][agent_id]["repo"]["url"])
    commit(repo, {"Dockerfile": "FROM choir-base\nRUN echo choir-test-boom && false\n"})
    async with running_daemon(home):
        code, out, err = await choirctl(home, "agent", "build", agent_id)
        ghost = await choirctl(home, "agent", "build", "ghost")

    assert (code, out) == (1, "")
    assert "error: docker build failed: The command " in err
    assert "last lines of the build:" in err
    assert "  | choir-test-boom" in err
    assert "Traceback" not in err
    assert ghost[0] == 4
    assert ghost[2].startswith("error: no agent named 'ghost' in the running config")


async def test_config_load_fetches_warns_on_an_unreachable_remote_and_status_flags_it(
    root, pg_params
):
    home, agent_id = _home(root, pg_params)
    data = read_config(home)
    local_repo = Path(data["agents"][agent_id]["repo"]["url"])
    remote = root / "agent.git"
    data["agents"][agent_id]["repo"]["url"] = bare_remote(local_repo, remote)
    write_config(home, data)
    clone = home.repos / "agents" / agent_id

    async with running_daemon(home):
        await poll_until(lambda: (clone / "Dockerfile").is_file(), within=30)  # fetched at start
        code, _, err = await choirctl(home, "config", "load")
        assert (code, err) == (0, ""), err
        hidden = move_away(remote)
        code, out, err = await choirctl(home, "config", "load")
        status_code, status_out, _ = await choirctl(home, "status")
        status_json = json.loads((await choirctl(home, "status", "--json"))[1])

    assert code == 0
    assert out.startswith("config staged")
    assert f"warning: repo agents/{agent_id}: fetch from file://{remote} failed (" in err
    assert "using the stale clone at" in err
    assert status_code == 0
    assert (
        f"repos     3 (2 local, 1 cloned); STALE: agents/{agent_id} (last fetch failed; "
        "choirctl config load retries)"
    ) in status_out.splitlines()
    rows = {row["key"]: row for row in status_json["repos"]}
    assert rows[f"agents/{agent_id}"]["stale"] is True
    assert rows["global"]["local"] is True
    hidden.rename(remote)


async def test_config_load_refuses_invalid_repo_contents_and_stages_nothing(root, pg_params):
    home, agent_id = _home(root, pg_params)
    repo = Path(read_config(home)["agents"][agent_id]["repo"]["url"])

    async with running_daemon(home):
        commit(repo, {"tools/test.bad.json": '{"llm": {"name": "test.bad"}}'})
        code, out, err = await choirctl(home, "config", "load")
        diff = await choirctl(home, "config", "diff")
        commit(repo, {"tools/test.bad.json": tool("test.bad")})
        fixed = await choirctl(home, "config", "load")

    assert (code, out) == (3, "")
    assert f"{agent_id}: tools/agent/test.bad.json: " in err
    assert diff[0] == 5, "nothing is staged"
    assert fixed[0] == 0, fixed[2]
