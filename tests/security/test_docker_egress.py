"""Issue 11, hole 9: from an agent container, this host's own services and link-local (cloud
metadata) addresses are out of reach by default; ordinary outbound traffic still flows.

Everything a probe in the container reaches is on this machine (ENVIRONMENT.md's network rule):
- TCP listeners the test opens on the host's address on the agent's network (the bridge
  gateway) and on docker0's address — services on the host's own addresses;
- 169.254.169.254 put on a dummy interface the test creates on the host (a metadata service
  on the host itself: the INPUT path);
- a network namespace the test makes, joined to the host by a veth pair, standing for the
  outside world: a listener there is ordinary outbound traffic (routed, NAT'ed: the FORWARD
  path), and 169.254.169.254 routed to it stands for a cloud's metadata service off the host.
Before the fix the agent ran on docker's `bridge` and reached all of them. With
`container.allow_metadata` the metadata address is reached again, the host still is not.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.homes import external_postgres, make_home
from tests.runtime.conftest import BUILD_TIMEOUT_S
from tests.security.conftest import Choird, exec_in, the_container

# serial: the fixtures put 169.254.169.254 on this host (a route, a dummy interface): two tests
# at once would collide on it.
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(BUILD_TIMEOUT_S)]

METADATA = "169.254.169.254"
PROBE = r"""
import json, socket, sys
seen = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as conn:
            seen[target] = conn.recv(16).decode() or "connected"
    except OSError as error:
        seen[target] = type(error).__name__
print(json.dumps(seen))
"""


@pytest.fixture(autouse=True)
def _root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces, dummy interfaces and iptables need root")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@contextmanager
def listener(address: str, answer: bytes = b"hello") -> Iterator[str]:
    """A TCP server at `address` answering every connection with `answer`; `host:port`."""
    server = socket.create_server((address, 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"{address}:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


@dataclass(frozen=True)
class Outside:
    """A host in a network namespace of the test's own, routed through this host."""

    address: str
    """A listener there: `host:port`."""
    metadata: str
    """The same listener reached as 169.254.169.254: `host:port`."""


@pytest.fixture
def outside() -> Iterator[Outside]:
    tag = secrets.token_hex(3)
    namespace, here, there = f"choir-out-{tag}", f"vco{tag}", f"vcn{tag}"
    octet = int(tag[:2], 16)
    host_ip, far_ip = f"198.18.{octet}.1", f"198.18.{octet}.2"
    with ExitStack() as undo:
        ip("netns", "add", namespace)
        undo.callback(ip, "netns", "del", namespace)
        ip("link", "add", here, "type", "veth", "peer", "name", there)
        undo.callback(subprocess.run, ["ip", "link", "del", here], check=False, timeout=10)
        ip("link", "set", there, "netns", namespace)
        ip("addr", "add", f"{host_ip}/30", "dev", here)
        ip("link", "set", here, "up")
        inside = ("netns", "exec", namespace, "ip")
        ip(*inside, "addr", "add", f"{far_ip}/30", "dev", there)
        ip(*inside, "addr", "add", f"{METADATA}/32", "dev", there)
        ip(*inside, "link", "set", there, "up")
        ip(*inside, "link", "set", "lo", "up")
        ip(*inside, "route", "add", "default", "via", host_ip)
        ip("route", "add", f"{METADATA}/32", "via", far_ip)
        undo.callback(subprocess.run, ["ip", "route", "del", f"{METADATA}/32"], check=False)
        server = subprocess.Popen(
            ["ip", "netns", "exec", namespace, "timeout", "300", "python3", "-c", SERVE],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        undo.callback(server.stdout.close)
        undo.callback(server.wait, 10)
        # SIGTERM, not SIGKILL: `timeout` passes it on to the server; killed, it left the
        # server running with no one to end it (`./dev test`'s subreaper named it)
        undo.callback(server.terminate)
        port = server.stdout.readline().strip()
        yield Outside(f"{far_ip}:{port}", f"{METADATA}:{port}")


SERVE = """
import socket
server = socket.create_server(("0.0.0.0", 0))
print(server.getsockname()[1], flush=True)
while True:
    conn, _ = server.accept()
    with conn:
        conn.sendall(b"outside")
"""


@contextmanager
def metadata_on_this_host() -> Iterator[str]:
    """169.254.169.254 on a dummy interface of this host, a listener on it: `host:port`.
    (Deleting either end of a veth pair deletes both.)"""
    name = f"dcm{secrets.token_hex(3)}"
    try:
        ip("link", "add", name, "type", "dummy")
    except subprocess.CalledProcessError:  # a kernel without the dummy driver: a lone veth
        ip("link", "add", name, "type", "veth", "peer", "name", f"{name}p")
    try:
        ip("addr", "add", f"{METADATA}/32", "dev", name)
        ip("link", "set", name, "up")
        with listener(METADATA, b"metadata") as where:
            yield where
    finally:
        subprocess.run(["ip", "link", "del", name], check=False, timeout=10)


async def probe(container: Any, *targets: str) -> dict[str, str]:
    code, output = await exec_in(container, "/opt/choir/bin/python", "-c", PROBE, *targets)
    assert code == 0, output
    seen: dict[str, str] = json.loads(output.strip().splitlines()[-1])
    return seen


def gateway_of(container: Any) -> str:
    container.reload()
    (network,) = container.attrs["NetworkSettings"]["Networks"].values()
    return str(network["Gateway"])


def docker0_address() -> str:
    """This host's address on docker's default bridge: another of the host's own addresses."""
    shown = subprocess.run(
        ["ip", "-j", "-4", "addr", "show", "dev", "docker0"],
        check=True,
        capture_output=True,
        text=True,
        timeout=10,
    )
    return str(json.loads(shown.stdout)[0]["addr_info"][0]["local"])


async def test_the_host_and_metadata_are_blocked_and_outbound_flows(
    choird: Choird, engine: docker.DockerClient, outside: Outside
) -> None:
    await choird.start()
    container = the_container(engine, choird)
    gateway = gateway_of(container)
    with (
        listener(gateway) as on_gateway,
        listener(docker0_address()) as on_docker0,
        metadata_on_this_host() as metadata_here,
    ):
        seen = await probe(container, on_gateway, on_docker0, metadata_here, outside.address)
    assert seen[outside.address] == "outside", seen  # ordinary outbound: routed and NAT'ed
    blocked = {on_gateway, on_docker0, metadata_here}
    assert {seen[target] for target in blocked} <= {"OSError", "ConnectionRefusedError"}, seen
    await choird.client.agent_stop("agent-1")
    # off the host, as on a cloud VM: routed to the outside namespace, and refused
    await choird.start()
    container = the_container(engine, choird)
    seen = await probe(container, outside.metadata, outside.address)
    assert seen[outside.address] == "outside", seen
    assert seen[outside.metadata] in ("OSError", "ConnectionRefusedError"), seen
    verified = await choird.client.call("agent.verify", agent_id="agent-1")
    (egress,) = [c for c in verified["checks"] if c["item"] == "egress_filtered"]
    assert egress["ok"], egress
    assert egress["required"]
    assert "rules in place" in egress["actual"]
    await choird.client.agent_stop("agent-1")


@pytest.fixture
def allowing_home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(
        root, postgres=external_postgres(pg_params), container={"allow_metadata": True}
    )


async def test_allow_metadata_opens_link_local_and_nothing_else(
    allowing_home: ChoirHome, engine: docker.DockerClient, outside: Outside
) -> None:
    from choir.client import ChoirClient
    from tests.harness.daemons import running_daemon
    from tests.runtime.conftest import containers_of

    async with (
        running_daemon(allowing_home, runtime="docker"),
        await ChoirClient.connect(allowing_home, call_timeout=BUILD_TIMEOUT_S) as client,
    ):
        try:
            await client.agent_start("agent-1", {"dm": "console"})
            (container,) = containers_of(engine, allowing_home)
            assert container.attrs["HostConfig"]["NetworkMode"] == "choir-metadata"
            with (
                listener(gateway_of(container)) as on_gateway,
                metadata_on_this_host() as metadata_here,
            ):
                seen = await probe(container, metadata_here, on_gateway)
            seen |= await probe(container, outside.metadata)  # once it is no longer local
            assert seen[metadata_here] == "metadata", seen
            assert seen[outside.metadata] == "outside", seen
            assert seen[on_gateway] in ("OSError", "ConnectionRefusedError"), seen
            await client.agent_stop("agent-1")
        finally:
            for leftover in containers_of(engine, allowing_home):
                leftover.remove(force=True)
            await asyncio.sleep(0)
