"""`agent build` (§17.3): the agent's image, built only when something it is made of changed.

`ensure_agent_image` is the one entry point: `choirctl agent build` (the `agent.build` verb),
`agent update`, `choir up` and the docker runtime's start all call it. It answers an `ImageRef`
naming the image to run; `built` says whether a docker build ran or the image was up to date.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from choir.config import ChoirConfig
from choir.errors import ChoirError
from choir.home import ChoirHome
from choir.protocol import VersionInfo

TOTAL_STEPS: Final = 10
"""§17.3 has ten steps; progress counts them."""


@dataclass(frozen=True)
class ImageRef:
    """An agent image ready to run."""

    tag: str
    """`choir-agent-<id>:<image_version>`."""
    id: str
    """The docker image id (`sha256:…`)."""
    version: VersionInfo
    """The version.json baked into the image, which INIT_HELLO must match."""
    built: bool
    """False when the image was already up to date and no docker build ran."""


@dataclass(frozen=True)
class BuildProgress:
    """One progress item: a §17.3 step starting, or a line of docker build output."""

    step: int
    """1..TOTAL_STEPS."""
    title: str
    """What the step does."""
    detail: str = ""
    """What it found or decided (e.g. `up to date`)."""
    log: str | None = None
    """A line of docker build output, when this item is one."""


Progress = Callable[[BuildProgress], None]
"""Receives progress items on the event loop's thread."""


class BuildError(ChoirError):
    """A build failed; `log_tail` holds the last lines of the docker build output."""

    def __init__(self, message: str, log_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail or []


async def ensure_agent_image(
    home: ChoirHome,
    config: ChoirConfig,
    agent_id: str,
    progress: Progress | None = None,
) -> ImageRef:
    """Fetch the agent's repos, build the base and agent images if needed; the image to run.

    Validates everything (manifests, skills, Dockerfiles) before any docker build. A failing
    build raises `BuildError` with the log tail and leaves the previous image tagged.
    """
    raise ChoirError("agent build is not implemented yet")
