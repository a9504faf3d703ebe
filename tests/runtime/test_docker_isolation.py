"""From inside a running agent container: no way to choird's operator API, no secret in sight.

A probe runs in the agent's container (`docker exec`, as the container's user, with the image's
Python and choir's own transport client) and reports what it can reach and read. The host side
then checks it: the operator socket's path does not exist in there, operator verbs on the agent
socket are refused as unknown, and no process's environment holds the lease token (its sha256 is
what choird stored) or any value of secrets.json — although the agent has asked for and holds
its git identity's token.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import docker
import pytest

from tests.harness.daemons import session_row
from tests.harness.homes import SECRETS
from tests.runtime.conftest import BUILD_TIMEOUT_S, Choird, chat, containers_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]

OPERATOR_VERBS = ("status", "agent.list", "agent.start", "secret.list", "config.show", "shutdown")
PROBE = r"""
import asyncio, glob, json, os, socket, sys
from choir.transport import RpcError
from choir.transport.uds.client import UdsClient

out = {"uid": os.getuid()}
try:
    probe = socket.socket(socket.AF_UNIX)
    probe.connect(sys.argv[1])
    out["operator_socket"] = "connected"
except OSError as error:
    out["operator_socket"] = type(error).__name__

async def verbs():
    client = await UdsClient.connect(
        "/run/choir/choir.sock", session_id=os.environ["CHOIR_SESSION_ID"], lease_token="guessed"
    )
    answers = {}
    for verb in sys.argv[2].split(","):
        try:
            await client.call(verb, {})
            answers[verb] = "answered"
        except RpcError as error:
            answers[verb] = f"{error.code}: {error.message}"
    await client.close()
    return answers

out["verbs"] = asyncio.run(verbs())
environ = {}
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        environ[path] = open(path, "rb").read().decode(errors="replace").split("\0")
    except OSError as error:
        environ[path] = ["unreadable: " + type(error).__name__]
out["environ"] = environ
out["cmdlines"] = {
    path.split("/")[2]: open(path, "rb").read().replace(b"\0", b" ").decode(errors="replace")
    for path in glob.glob("/proc/[0-9]*/cmdline")
}
out["mounts"] = open("/proc/self/mountinfo").read()
print(json.dumps(out))
"""


async def probe(container: Any, operator_socket: str) -> dict[str, Any]:
    """The probe's findings; in a thread, since choird answers on this test's event loop."""
    done = await asyncio.to_thread(
        container.exec_run,
        ["/opt/choir/bin/python", "-c", PROBE, operator_socket, ",".join(OPERATOR_VERBS)],
    )
    assert done.exit_code == 0, done.output.decode()
    result: dict[str, Any] = json.loads(done.output.decode().strip().splitlines()[-1])
    return result


def words(environ: dict[str, list[str]]) -> set[str]:
    """Every variable, every value, and every part of a value split on = , : and spaces."""
    found: set[str] = set()
    for variables in environ.values():
        for variable in variables:
            found.add(variable)
            for separator in ("=", ",", ":", " "):
                found.update(variable.split(separator))
    return found


async def test_the_operator_socket_is_unreachable_and_no_secret_is_in_any_environment(
    choird: Choird, engine: docker.DockerClient
) -> None:
    started = await choird.start()
    await chat(choird.client, "hello")  # the agent is up and has fetched its secrets
    (container,) = containers_of(engine, choird.home)
    seen = await probe(container, str(choird.home.operator_socket))

    assert seen["operator_socket"] == "FileNotFoundError"
    assert str(choird.home.socks / "choird.sock") not in seen["mounts"]
    assert "choird.sock" not in seen["mounts"]
    for verb in OPERATOR_VERBS:
        assert seen["verbs"][verb].startswith("not_found: unknown verb"), seen["verbs"]

    environ = seen["environ"]
    assert len(environ) >= 3, environ  # docker-init, choir-agent, the probe itself
    agents = {
        pid
        for pid, cmdline in seen["cmdlines"].items()
        if "choir-agent" in cmdline and "/sbin/docker-init" not in cmdline
    }
    assert agents
    unreadable = {
        path.split("/")[2]
        for path, values in environ.items()
        if any(v.startswith("unreadable") for v in values)
    }
    assert unreadable == agents  # choir-agent is not dumpable: test_agent_memory.py
    everything = words(environ)
    assert not any(name.startswith("CHOIR_LEASE_TOKEN") for name in everything)
    row = await session_row(choird.daemon, started["session_id"])
    assert row.lease_id is not None
    hashes = {hashlib.sha256(word.encode()).hexdigest() for word in everything}
    assert row.lease_id not in hashes
    for name, value in SECRETS.items():
        assert all(value not in variable for vs in environ.values() for variable in vs), name
    assert {"CHOIR_AGENT_ID=agent-1", f"CHOIR_SESSION_ID={started['session_id']}"} <= everything

    await choird.client.agent_stop("agent-1")
