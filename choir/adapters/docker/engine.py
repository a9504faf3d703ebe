"""The Docker engine, through the docker SDK: the few calls builds and runtimes need.

The SDK blocks, so every call runs in a worker thread (`asyncio.to_thread`); SDK and transport
errors become one-line choir errors here (no engine → `UnavailableError` naming the process
runtime). Builds use the engine's build API with a tar context made by the caller, stream each
output line to a callback (called in the worker thread), and tag only after success, so a failed
build never moves a tag off the previous image.

    engine = await DockerEngine.connect()
    image_id = await engine.build(context_tar, dockerfile="Dockerfile", labels={...},
                                  on_line=print)
    await engine.tag(image_id, "choir-agent-alice:1a2b3c4")
"""

from __future__ import annotations

import asyncio
import io
import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import docker
import docker.errors
import requests.exceptions

from choir.adapters.docker.host import DEFAULT_SOCKET
from choir.errors import ChoirError, NotFoundError, UnavailableError

T = TypeVar("T")

CONNECT_TIMEOUT_S: Final = 5.0
"""How long `connect` waits for the engine to answer a ping."""
API_TIMEOUT_S: Final = 600
"""Per-request timeout once connected; builds stream, so this bounds silence, not duration."""
LOG_TAIL_LINES: Final = 30
"""Lines of build output a failed build reports."""
NO_ENGINE: Final = (
    "no Docker engine answers{where}: start dockerd (scripts/ensure-docker), or run agents "
    "unsandboxed with the process runtime"
)

LineFn = Callable[[str], None]
"""Receives one line of build output (in the worker thread running the build)."""


@dataclass(frozen=True)
class ImageInfo:
    """An image in the engine's local cache."""

    id: str
    """`sha256:…`."""
    tags: tuple[str, ...]
    labels: Mapping[str, str]
    created: str
    """ISO 8601 creation time (UTC)."""


class BuildFailed(ChoirError):
    """A docker build failed; `log_tail` holds the last lines of its output."""

    def __init__(self, message: str, log_tail: list[str]) -> None:
        super().__init__(message)
        self.log_tail = log_tail


class DockerEngine:
    """One connection to the engine; `close()` it when done."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client

    @classmethod
    async def connect(cls, base_url: str | None = None) -> DockerEngine:
        """Connect to `base_url`, else `$DOCKER_HOST`, else the default socket, and ping it."""
        where = base_url or os.environ.get("DOCKER_HOST") or ""
        suffix = f" at {where}" if where else ""

        def open_client() -> docker.DockerClient:
            _probe_unix_socket(where or DEFAULT_SOCKET)
            if base_url:
                client = docker.DockerClient(base_url=base_url, timeout=int(CONNECT_TIMEOUT_S))
            else:
                client = docker.from_env(timeout=int(CONNECT_TIMEOUT_S))
            try:
                client.ping()
            except BaseException:
                client.close()  # no socket left open behind a failed connect
                raise
            client.api.timeout = API_TIMEOUT_S
            return client

        try:
            client = await asyncio.to_thread(open_client)
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            raise UnavailableError(NO_ENGINE.format(where=suffix)) from None
        return cls(client)

    @property
    def client(self) -> docker.DockerClient:
        """The SDK client, for calls this adapter does not wrap yet."""
        return self._client

    def close(self) -> None:
        self._client.close()

    async def ping(self) -> bool:
        """True when the engine answers."""
        try:
            return bool(await asyncio.to_thread(self._client.ping))
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            return False

    async def image(self, reference: str) -> ImageInfo | None:
        """The image `reference` (tag or id) names, or None."""

        def get() -> ImageInfo | None:
            try:
                return _info(self._client.images.get(reference).attrs)
            except docker.errors.ImageNotFound:
                return None

        return await self._run(get)

    async def images(self, labels: Mapping[str, str | None]) -> list[ImageInfo]:
        """Images carrying every label (`None`: the label with any value), newest first."""
        wanted = [key if value is None else f"{key}={value}" for key, value in labels.items()]

        def find() -> list[ImageInfo]:
            found = self._client.api.images(filters={"label": wanted})
            return [_summary_info(item) for item in found]

        infos = await self._run(find)
        return sorted(infos, key=lambda info: info.created, reverse=True)

    async def tag(self, image_id: str, reference: str) -> None:
        """Point `reference` (`repository:tag`) at `image_id`."""
        repository, _, tag = reference.rpartition(":")
        if not repository:
            repository, tag = reference, "latest"

        def do_tag() -> None:
            if not self._client.api.tag(image_id, repository, tag, force=True):
                raise ChoirError(f"docker could not tag {image_id} as {reference}")

        await self._run(do_tag)

    async def remove_image(self, reference: str, *, force: bool = False) -> None:
        """Remove a tag or image; a missing one is not an error."""

        def remove() -> None:
            try:
                self._client.api.remove_image(reference, force=force, noprune=False)
            except docker.errors.ImageNotFound:
                return

        await self._run(remove)

    async def build(
        self,
        context: bytes,
        *,
        dockerfile: str,
        labels: Mapping[str, str] | None = None,
        buildargs: Mapping[str, str] | None = None,
        on_line: LineFn | None = None,
    ) -> str:
        """Build from `context` (an uncompressed tar); the image id. No tag is set here.

        Raises `BuildFailed` with the last lines of output when a step fails.
        """
        tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)

        def run() -> str:
            items = self._client.api.build(
                fileobj=io.BytesIO(context),
                custom_context=True,
                dockerfile=dockerfile,
                labels=dict(labels or {}),
                buildargs=dict(buildargs or {}),
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            return _follow_build(items, tail, on_line)

        try:
            return await asyncio.to_thread(run)
        except docker.errors.APIError as error:
            tail.append(_api_message(error))
            raise BuildFailed(f"docker build failed: {_api_message(error)}", list(tail)) from None
        except (requests.exceptions.RequestException, OSError) as error:
            raise UnavailableError(f"the Docker engine went away during a build: {error}") from None

    async def _run(self, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except docker.errors.NotFound as error:
            raise NotFoundError(_api_message(error)) from None
        except docker.errors.APIError as error:
            raise ChoirError(f"docker: {_api_message(error)}") from None
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            raise UnavailableError(NO_ENGINE.format(where="")) from None


def _probe_unix_socket(url: str) -> None:
    """Connect to a `unix://` engine socket once, closing it either way: the SDK leaves its
    socket open when that connect fails (a ResourceWarning, and an fd per attempt)."""
    if not url.startswith("unix://"):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(CONNECT_TIMEOUT_S)
        probe.connect(url.removeprefix("unix://"))


def _follow_build(items: Iterator[dict[str, Any]], tail: deque[str], on_line: LineFn | None) -> str:
    """Read a build's JSON stream to its end (so its connection goes back to the pool, never
    left open); the image id, or `BuildFailed` with the first error."""
    image_id = ""
    failure: str | None = None
    for item in items:
        lines = str(item.get("stream", "")).splitlines()
        if "error" in item:
            lines = [str(item.get("error", "")).strip()]
            failure = failure or lines[0]
        aux = item.get("aux")
        if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
            image_id = aux["ID"]
        for line in lines:
            if line.strip():
                tail.append(line)
                if on_line is not None:
                    on_line(line)
    if failure is not None:
        raise BuildFailed(f"docker build failed: {failure}", list(tail))
    if not image_id:
        raise BuildFailed("docker build ended without an image id", list(tail))
    return image_id


def _info(attrs: Mapping[str, Any]) -> ImageInfo:
    config = attrs.get("Config") or {}
    return ImageInfo(
        id=str(attrs["Id"]),
        tags=tuple(attrs.get("RepoTags") or ()),
        labels=dict(config.get("Labels") or {}),
        created=str(attrs.get("Created", "")),
    )


def _summary_info(item: Mapping[str, Any]) -> ImageInfo:
    return ImageInfo(
        id=str(item["Id"]),
        tags=tuple(t for t in item.get("RepoTags") or () if t != "<none>:<none>"),
        labels=dict(item.get("Labels") or {}),
        created=datetime.fromtimestamp(int(item.get("Created", 0)), UTC).isoformat(),
    )


def _api_message(error: docker.errors.APIError) -> str:
    explanation = getattr(error, "explanation", None)
    text = explanation.decode() if isinstance(explanation, bytes) else str(explanation or error)
    lines = text.strip().splitlines()
    return lines[-1] if lines else type(error).__name__
