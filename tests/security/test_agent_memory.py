"""A tool cannot read choir-agent's memory, environment or file descriptors (issue 11 point 2).

The agent holds the lease token and every secret its session fetched; its tools run with its uid.
A probe (`memory_probe.py`) run as a tool would run looks for choir-agent's processes (and PID 1)
and tries `/proc/<pid>/environ`, `/proc/<pid>/fd/` and a scan of `/proc/<pid>/mem` for agent-1's
git token, which the agent fetched at start. Every attempt on the agent must fail with a
permission error, and the token must not be found anywhere:

- on the process runtime, from a real `choir.exec` of the agent, in the bwrap sandbox and
  unsandboxed (root here: the agent drops its capabilities, so the exec has no CAP_SYS_PTRACE);
- in Docker, from `docker exec` in the real agent container (the container's uid and its
  dropped capabilities, which an exec in there has too).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import poll_until
from tests.harness.homes import GIT_TOKEN
from tests.runtime.conftest import BUILD_TIMEOUT_S, Choird, chat, containers_of
from tests.security.process_agents import SANDBOXES, Sandbox, exec_script, process_agent

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("memory_probe.py")
CANARY = GIT_TOKEN.encode().hex()


def refused_everywhere(report: dict[str, Any]) -> None:
    """Each choir-agent process was seen and nothing of it could be read; no canary anywhere."""
    agents = {pid: seen for pid, seen in report.items() if pid != "1"}
    assert agents, report
    for pid, seen in agents.items():
        assert seen == dict.fromkeys(("environ", "fd", "mem"), "PermissionError"), (pid, report)
    assert "found" not in json.dumps(report), report


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_an_exec_cannot_read_the_agents_memory_on_the_process_runtime(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    command = f"python3 probe.py {CANARY} {root} > probe.json; echo probe-done"
    script = exec_script(command, done="probe-done")
    async with process_agent(
        root, pg_params, script, sandbox=sandbox, monkeypatch=monkeypatch
    ) as agent:
        (agent.workspace / "probe.py").write_text(PROBE.read_text())
        await agent.start_worker()
        result = agent.workspace / "probe.json"
        await poll_until(lambda: result.exists() and result.stat().st_size > 0, within=60)
        refused_everywhere(json.loads(result.read_text()))
        await agent.client.agent_stop("agent-1")


@pytest.mark.timeout(BUILD_TIMEOUT_S)
async def test_a_process_in_the_agent_container_cannot_read_the_agents_memory(
    choird: Choird, engine: docker.DockerClient
) -> None:
    await choird.start()
    await chat(choird.client, "hello")  # the agent is up and has fetched its secrets
    (container,) = containers_of(engine, choird.home)
    done = await asyncio.to_thread(
        container.exec_run, ["/opt/choir/bin/python", "-c", PROBE.read_text(), CANARY]
    )
    assert done.exit_code == 0, done.output.decode()
    refused_everywhere(json.loads(done.output.decode().strip().splitlines()[-1]))
    await choird.client.agent_stop("agent-1")
