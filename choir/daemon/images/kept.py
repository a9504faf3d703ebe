"""The images `agent build` keeps (`KEEP_PREVIOUS`), and the one an agent is pinned to.

`agent rollback` picks a kept image and pins the agent to it: `runtime/<agent-id>/pinned-image`
names the image and its version.json, and the docker runtime starts that image instead of the
latest build while the pin holds — through restarts and choird restarts — until `agent update`
(which `choir up` runs) moves the agent to the latest build again and removes the pin. Every
agent image carries its version.json as the `choir.version` label, so a kept image's version
is one label read, never a container run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError

from choir.daemon.images.base import MANAGED
from choir.home import ChoirHome
from choir.protocol import VersionInfo

if TYPE_CHECKING:  # docker's SDK loads only where an engine is used
    from choir.adapters.docker.engine import DockerEngine, ImageInfo

VERSION_LABEL: Final = "choir.version"
"""An agent image's label holding its version.json (compact JSON)."""


@dataclass(frozen=True)
class Pin:
    """The image an agent is rolled back to."""

    image_id: str
    tag: str
    version: VersionInfo


def pin_file(home: ChoirHome, agent_id: str) -> Path:
    return home.root / "runtime" / agent_id / "pinned-image"


def pinned(home: ChoirHome, agent_id: str) -> Pin | None:
    """The agent's pin, or None (none, or a file this choird cannot read: ignored)."""
    try:
        data = json.loads(pin_file(home, agent_id).read_text())
        return Pin(data["image_id"], data["tag"], VersionInfo.model_validate(data["version"]))
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None


def pin(home: ChoirHome, agent_id: str, target: Pin) -> None:
    """Pin the agent to `target` (whole or not at all: a start never reads half a file)."""
    path = pin_file(home, agent_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "image_id": target.image_id,
        "tag": target.tag,
        "version": target.version.model_dump(mode="json"),
    }
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    partial.replace(path)


def unpin(home: ChoirHome, agent_id: str) -> None:
    pin_file(home, agent_id).unlink(missing_ok=True)


async def kept_images(engine: DockerEngine, home: ChoirHome, agent_id: str) -> list[ImageInfo]:
    """The agent's images this home built and still has, newest first."""
    mine = {**MANAGED, "choir.role": "agent", "choir.agent": agent_id, "choir.home": str(home.root)}
    return await engine.images(mine)


def version_of(image: ImageInfo) -> VersionInfo | None:
    """The version.json baked into `image` (None: built before images carried it)."""
    try:
        return VersionInfo.model_validate_json(image.labels.get(VERSION_LABEL, ""))
    except ValidationError:
        return None


def older_than(images: list[ImageInfo], current: str | None) -> ImageInfo | None:
    """The newest of `images` (newest first) older than the image `current` names; None when
    `current` is not among them or is the oldest."""
    ids = [image.id for image in images]
    if current not in ids:
        return None
    index = ids.index(current) + 1
    return images[index] if index < len(images) else None


def named(images: list[ImageInfo], name: str) -> ImageInfo | None:
    """The image `name` names: its id (`sha256:` optional, 12 or more hex digits), a tag, or
    the image version a tag ends with; the newest such."""
    wanted = name.removeprefix("sha256:")
    for image in images:
        short = image.id.removeprefix("sha256:")
        if len(wanted) >= 12 and short.startswith(wanted):
            return image
        if name in image.tags or any(tag.endswith(f":{name}") for tag in image.tags):
            return image
    return None


def tag_of(image: ImageInfo) -> str:
    """The image's tag, or its id when it has lost every tag."""
    return image.tags[0] if image.tags else image.id
