"""Container operations on the Docker engine: the few calls the docker runtime needs.

A thin wrapper over the docker SDK's low-level API, next to `docker_engine` (connection, images,
builds). Short calls run in the default worker threads; the one call that lasts as long as a
container — following its output to the end, then reading its exit code — runs in a thread of its
own (`ContainerEngine.follow`), so running agents never occupy the shared pool. SDK and transport
errors become one-line choir errors here.

The lease token reaches the container on stdin (`start(…, stdin=…)`): attached before the
container starts, written once, then closed — never in the environment (§14.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

import docker.errors
import requests.exceptions

from choir.adapters.docker.engine import DockerEngine
from choir.errors import ChoirError, ConflictError, NotFoundError, UnavailableError

T = TypeVar("T")

ENGINE_GONE: Final = (
    "the Docker engine stopped answering: start dockerd (scripts/ensure-docker), or run agents "
    "unsandboxed with choird --runtime process"
)
MAX_FOLLOWERS: Final = 256
"""Threads following containers at once (one per running agent)."""


@dataclass(frozen=True)
class ContainerInfo:
    """A container as `docker ps -a` lists it."""

    id: str
    name: str
    labels: Mapping[str, str]
    state: str
    """`created`, `running`, `exited`, …"""


class Sink(Protocol):
    """Where a container's output is copied (a file, or choir's whole-chunk `AppendSink`)."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


@dataclass(frozen=True)
class NetworkInfo:
    """A docker network as `docker network inspect` shows it."""

    id: str
    name: str
    labels: Mapping[str, str]
    bridge: str | None
    """The host interface of a bridge network (`docker0`, `br-<id>`, or the name it was given)."""
    gateway: str | None
    """The host's address on it."""


@dataclass(frozen=True)
class ContainerSpec:
    """What `create` needs; `options` are the security profile's SDK arguments."""

    image: str
    command: Sequence[str]
    name: str
    environment: Mapping[str, str]
    labels: Mapping[str, str]
    working_dir: str
    options: Mapping[str, Any]


class ContainerEngine:
    """Containers on one engine connection; `close()` ends the followers' pool."""

    def __init__(self, engine: DockerEngine) -> None:
        self.engine = engine
        self._api = engine.client.api
        self._followers = ThreadPoolExecutor(MAX_FOLLOWERS, thread_name_prefix="choir-follow")

    def close(self) -> None:
        self._followers.shutdown(wait=False, cancel_futures=True)
        self.engine.close()

    async def create(self, spec: ContainerSpec) -> str:
        """Create (not start) a container with stdin open; its id."""

        def create() -> str:
            options = dict(spec.options)
            volumes = options.pop("volumes", {})
            user = options.pop("user", None)
            host_config = self._api.create_host_config(
                binds=volumes,
                **options,
            )
            created = self._api.create_container(
                spec.image,
                command=list(spec.command),
                name=spec.name,
                environment=dict(spec.environment),
                labels=dict(spec.labels),
                working_dir=spec.working_dir,
                user=user,
                volumes=[v["bind"] for v in volumes.values()],
                host_config=host_config,
                stdin_open=True,
                detach=False,
            )
            return str(created["Id"])

        return await self._run(create)

    async def start(self, container: str, *, stdin: bytes) -> None:
        """Start `container`, write `stdin` to it and close its stdin."""

        def start() -> None:
            attached = self._api.attach_socket(container, params={"stdin": 1, "stream": 1})
            raw: socket.socket = getattr(attached, "_sock", attached)
            try:
                self._api.start(container)
                raw.sendall(stdin)
                with contextlib.suppress(OSError):
                    raw.shutdown(socket.SHUT_WR)
            finally:
                attached.close()
                raw.close()

        await self._run(start)

    async def inspect(self, container: str) -> dict[str, Any]:
        return dict(await self._run(lambda: self._api.inspect_container(container)))

    async def follow(self, container: str, sink: Sink, *, since: float | None = None) -> int:
        """Copy the container's output (from `since`, a UNIX time, when given) into `sink`
        until it exits; its exit code."""

        def follow() -> int:
            with contextlib.suppress(*_TRANSPORT):
                logs = self._api.logs(container, stream=True, follow=True, since=since)
                for chunk in logs:
                    sink.write(chunk)
                    sink.flush()
            return int(self._api.wait(container, timeout=None).get("StatusCode", -1))

        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._followers, follow)
        except docker.errors.NotFound:
            return -1  # removed under our feet: it is gone either way
        except (docker.errors.DockerException, *_TRANSPORT):
            raise UnavailableError(ENGINE_GONE) from None

    async def stop(self, container: str, *, timeout_s: float) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`; a container already gone is fine."""
        await self._quietly(lambda: self._api.stop(container, timeout=int(timeout_s)))

    async def kill(self, container: str) -> None:
        await self._quietly(lambda: self._api.kill(container))

    async def remove(self, container: str) -> None:
        """Remove it, running or not; a container already gone is fine."""
        await self._quietly(lambda: self._api.remove_container(container, force=True))

    async def list(self, labels: Mapping[str, str]) -> list[ContainerInfo]:
        """Every container (running or not) carrying all of `labels`."""
        wanted = [f"{key}={value}" for key, value in labels.items()]
        found = await self._run(lambda: self._api.containers(all=True, filters={"label": wanted}))
        return [_info(item) for item in found]

    async def gateway(self, network: str = "bridge") -> str | None:
        """The host's address on `network` (containers reach host services there)."""
        return (await self.network(network)).gateway

    async def network(self, name: str) -> NetworkInfo:
        """The network `name`; NotFoundError when there is none."""
        return _network(await self._run(lambda: self._api.inspect_network(name)))

    async def ensure_network(self, name: str, labels: Mapping[str, str]) -> NetworkInfo:
        """The bridge network `name` carrying `labels`, created when missing: its host interface
        is named `name` (so firewall rules can key on it), no IPv6, and no traffic between its
        containers (one agent never reaches another). ConflictError when a network of that name
        exists without the labels — it is someone else's."""
        try:
            found = await self.network(name)
        except NotFoundError:
            with contextlib.suppress(ConflictError):  # another choird created it just now
                await self._create_network(name, labels)
            found = await self.network(name)
        if any(found.labels.get(key) != value for key, value in labels.items()):
            raise ConflictError(
                f"docker network {name} exists but choir did not create it: remove it "
                "(docker network rm) or set container.network to use it unfiltered"
            )
        return found

    async def _create_network(self, name: str, labels: Mapping[str, str]) -> None:
        options = {
            "com.docker.network.bridge.name": name,
            "com.docker.network.bridge.enable_icc": "false",
        }

        def create() -> None:
            try:
                self._api.create_network(
                    name,
                    driver="bridge",
                    options=options,
                    labels=dict(labels),
                    enable_ipv6=False,
                    check_duplicate=True,
                )
            except docker.errors.APIError as error:
                if error.status_code == 409:
                    raise ConflictError(_message(error)) from None
                raise

        await self._run(create)

    async def _quietly(self, call: Callable[[], object]) -> None:
        with contextlib.suppress(NotFoundError):
            await self._run(call)

    async def _run(self, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except docker.errors.NotFound as error:
            raise NotFoundError(f"docker: {_message(error)}") from None
        except docker.errors.APIError as error:
            raise ChoirError(f"docker: {_message(error)}") from None
        except (docker.errors.DockerException, *_TRANSPORT):
            raise UnavailableError(ENGINE_GONE) from None


_TRANSPORT: Final = (requests.exceptions.RequestException, OSError)


def _info(item: Mapping[str, Any]) -> ContainerInfo:
    names = item.get("Names") or [""]
    return ContainerInfo(
        id=str(item["Id"]),
        name=str(names[0]).lstrip("/"),
        labels=dict(item.get("Labels") or {}),
        state=str(item.get("State", "")),
    )


def _network(attrs: Mapping[str, Any]) -> NetworkInfo:
    options = attrs.get("Options") or {}
    network_id = str(attrs.get("Id", ""))
    bridge = options.get("com.docker.network.bridge.name")
    if bridge is None and attrs.get("Driver") == "bridge":
        bridge = f"br-{network_id[:12]}"
    gateways = [c.get("Gateway") for c in (attrs.get("IPAM") or {}).get("Config") or []]
    return NetworkInfo(
        id=network_id,
        name=str(attrs.get("Name", "")),
        labels=dict(attrs.get("Labels") or {}),
        bridge=str(bridge) if bridge else None,
        gateway=next((str(g) for g in gateways if g), None),
    )


def _message(error: docker.errors.APIError) -> str:
    explanation = getattr(error, "explanation", None)
    text = explanation.decode() if isinstance(explanation, bytes) else str(explanation or error)
    lines = text.strip().splitlines()
    return lines[-1] if lines else type(error).__name__
