"""Issue 19, agents over HTTP(S) (§12.1): under `choird --transport http` a docker agent reaches
choird over verified HTTPS on its network's gateway, through exactly one hole in the filter.

A real choird process (`--runtime docker --transport http --tls-self-signed`, a fixed loopback
port) starts the real agent image. The container's command must name
`https://<gateway>:<port>` and the certificate in /run/choir; from inside the container that
address and port are reached and verify against that certificate, another port of the host on
the same address is still refused. Chat answers over a TCP connection the agent holds to the
listener. choird is SIGKILLed and started again: the same container is adopted and chats again
over a new connection; `agent verify` fails, naming it, once the opening is removed by hand. The
hole is gone once choird stops. Before this change the container ran
`--control-plane=uds` and the gateway refused every port. The same holds when choird's listener
is on a wildcard address (the bridge listener shares its port).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.home import ChoirHome
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import get_session
from tests.docker_support import require_docker
from tests.faults.support import as_json, choirctl, kill9, spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home
from tests.harness.processes import BIN, environment
from tests.harness.waits import poll_until
from tests.runtime.conftest import BUILD_TIMEOUT_S
from tests.security.test_docker_egress import gateway_of, listener

# serial: the filter's rules are this host's (iptables), shared with the other egress tests
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(BUILD_TIMEOUT_S + 300)]

CERTIFICATE = "/run/choir/choird.crt"
ESTABLISHED = "01"
"""TCP_ESTABLISHED in /proc/net/tcp."""
PROBE = r"""
import json, socket, ssl, sys
ca, targets = sys.argv[1], sys.argv[2:]
seen = {}
for target in targets:
    host, port = target.rsplit(":", 1)
    try:
        conn = socket.create_connection((host, int(port)), timeout=3)
    except OSError as error:
        seen[target] = type(error).__name__
        continue
    try:
        with ssl.create_default_context(cafile=ca).wrap_socket(conn, server_hostname=host) as tls:
            seen[target] = "verified " + str(tls.version())
    except OSError as error:
        seen[target] = "connected, no verified TLS: " + type(error).__name__
    finally:
        conn.close()
print(json.dumps(seen))
"""
"""From inside the container: each `host:port` reached? Then TLS verified against `ca`?"""


@pytest.fixture(autouse=True)
def _root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("the egress filter (iptables) needs root")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def option(command: list[str], name: str) -> str:
    values = [arg.partition("=")[2] for arg in command if arg.startswith(f"{name}=")]
    assert len(values) == 1, command
    return values[0]


def the_container(engine: docker.DockerClient, home: ChoirHome) -> Any:
    wanted: dict[str, Any] = {"label": f"choir.home={home.root}"}
    (container,) = engine.containers.list(filters=wanted)
    return container


def peers(container: Any) -> set[tuple[str, int]]:
    """The established TCP peers in the container's network namespace (its /proc/net/tcp,
    read from the host: psutil sees only this namespace's)."""
    container.reload()
    table = Path(f"/proc/{container.attrs['State']['Pid']}/net/tcp").read_text()
    found = set()
    for line in table.splitlines()[1:]:
        remote, state = line.split()[2:4]
        if state != ESTABLISHED:
            continue
        address, _, port = remote.partition(":")
        found.add((str(ipaddress.IPv4Address(bytes.fromhex(address)[::-1])), int(port, 16)))
    return found


def iptables(*args: str) -> None:
    subprocess.run(["iptables", "-w", *args], check=True, capture_output=True, timeout=20)


def hole_rules(network: str) -> list[str]:
    listed = subprocess.run(
        ["iptables", "-w", "-S", f"CHOIR-LINK-{network}"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return [line for line in listed.stdout.splitlines() if line.startswith("-A ")]


async def lease_of(params: ConnectParams, session_id: str) -> str:
    conn = await connect(params)
    try:
        row = await get_session(conn, session_id)
    finally:
        await conn.close()
    assert row is not None, session_id
    assert row.lease_id is not None, session_id
    return row.lease_id


def build(home: ChoirHome) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "choirctl"), "agent", "build", "agent-1"],
        env=environment(CHOIR_HOME=str(home.root)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )


async def ctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(choirctl, home, *args)


async def chats(home: ChoirHome) -> None:
    said = await ctl(home, "chat", "agent-1", "hello")
    assert said.returncode == 0, said.stdout + said.stderr
    assert "Hello!" in said.stdout, said.stdout


@pytest.mark.parametrize("listen", ["127.0.0.1", "0.0.0.0"])
async def test_a_docker_agent_reaches_choird_over_verified_https_and_rides_out_a_restart(
    root: Any, pg_params: ConnectParams, listen: str
) -> None:
    require_docker()
    home = make_home(
        root,
        postgres=external_postgres(pg_params),
        heartbeat_interval_ms=1000,
        crash_detection_threshold_ms=30_000,  # the lease outlives the restart
    )
    port = free_port()
    args = ("--runtime", "docker", "--transport", "http", "--tls-self-signed")
    args += ("--listen", f"{listen}:{port}")  # on a wildcard too: the bridge shares the port
    engine = docker.from_env(timeout=60)
    choird = None
    try:
        choird = await asyncio.to_thread(spawn_choird, home, *args)
        built = await asyncio.to_thread(build, home)  # a first build takes minutes on a busy host
        assert built.returncode == 0, built.stdout + built.stderr
        started = as_json(await ctl(home, "agent", "start", "agent-1", "--dm", "console", "--json"))
        container = the_container(engine, home)
        gateway = gateway_of(container)
        network = container.attrs["HostConfig"]["NetworkMode"]
        command = [container.attrs["Path"], *container.attrs["Args"]]
        assert option(command, "--control-plane") == "http"
        assert option(command, "--endpoint") == f"https://{gateway}:{port}"
        assert option(command, "--ca-file") == CERTIFICATE
        assert "--lease-token-stdin" in command

        # the token: in no env, label or argument of the container (the lease id is its hash)
        lease_id = await lease_of(pg_params, started["session_id"])
        exposed = [
            *container.attrs["Config"]["Env"],
            *container.attrs["Config"]["Labels"].values(),
            *command,
        ]
        for value in exposed:
            for part in (value, value.partition("=")[2]):
                assert hashlib.sha256(part.encode()).hexdigest() != lease_id

        await chats(home)
        assert (gateway, port) in peers(container)  # the agent talks HTTPS to the listener
        assert any(f"--dport {port} " in rule for rule in hole_rules(network))

        with listener(gateway) as elsewhere:  # another service on the same host address
            code, output = await asyncio.to_thread(
                container.exec_run,
                ["/opt/choir/bin/python", "-c", PROBE, CERTIFICATE, f"{gateway}:{port}", elsewhere],
            )
        assert code == 0, output
        seen = json.loads(output.decode().strip().splitlines()[-1])
        assert seen[f"{gateway}:{port}"].startswith("verified TLSv1."), seen
        assert seen[elsewhere] in ("OSError", "ConnectionRefusedError"), seen
        code, output = await asyncio.to_thread(  # what it trusts is choird's to change
            container.exec_run, ["/opt/choir/bin/python", "-c", f"open({CERTIFICATE!r}, 'a')"]
        )
        assert code != 0, output
        assert b"PermissionError" in output, output

        kill9(choird)
        choird = await asyncio.to_thread(spawn_choird, home, *args)

        async def adopted() -> bool:
            status = await ctl(home, "agent", "status", "agent-1", "--json")
            return status.returncode == 0 and as_json(status)["state"] == "running"

        await poll_until(adopted, within=60, every=0.5)
        status = as_json(await ctl(home, "agent", "status", "agent-1", "--json"))
        assert (status["session_id"], status["container"]) == (
            started["session_id"],
            container.id,
        )
        await chats(home)
        assert (gateway, port) in peers(container)
        verified = as_json(await ctl(home, "agent", "verify", "agent-1", "--json"))
        (egress,) = [c for c in verified["checks"] if c["item"] == "egress_filtered"]
        assert egress["ok"], egress
        (rule,) = [r for r in hole_rules(network) if f"--dport {port} " in r]
        iptables("-D", *rule.split()[1:])  # someone removes the opening: verify says so
        refused = await ctl(home, "agent", "verify", "agent-1", "--json")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        verified = json.loads(refused.stdout)
        (egress,) = [c for c in verified["checks"] if c["item"] == "egress_filtered"]
        assert not egress["ok"], egress
        assert f"no opening to choird's listener {gateway}:{port}" in egress["actual"], egress
    finally:
        await asyncio.to_thread(teardown, home, choird)
        engine.close()
    assert not any(f"--dport {port} " in rule for rule in hole_rules(network))
