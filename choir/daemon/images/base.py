"""The `choir-base` image (§6.5, §17.3 step 4): OS packages, git and the choir runtime.

Built from the global repo's `Dockerfile.base` (choir's own copy when the repo has none) with
the host-built wheelhouse as its context, and only when something it is made of changed: the
Dockerfile, the base OS image, the wheels (choir's source or its pinned dependencies) or the
global repo's HEAD. Those inputs hash to a key the image carries as a label, so an up-to-date
base is found with one label query and no docker build.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from choir.config.scaffolding.scaffold import seeds_dir
from choir.daemon.images import dockerfile
from choir.daemon.images.context import TarContext, digest
from choir.daemon.images.wheelhouse import Wheelhouse, ensure_wheelhouse
from choir.errors import ConfigError, UsageError
from choir.home import ChoirHome

if TYPE_CHECKING:  # docker's SDK loads only where an engine is used
    from choir.adapters.docker.engine import DockerEngine, ImageInfo

BASE_REPOSITORY: Final = dockerfile.BASE_REPOSITORY
DOCKERFILE: Final = "Dockerfile.base"
MANAGED: Final = {"choir.managed": "true"}
"""The label every image and container choir makes carries."""

LineFn = Callable[[str], None]


@dataclass(frozen=True)
class BaseImage:
    tag: str
    """`choir-base:<key>`."""
    id: str
    built: bool


def base_dockerfile(global_repo: Path) -> tuple[str, str]:
    """`Dockerfile.base` of the global repo, else choir's own: (text, where it came from)."""
    own = global_repo / DOCKERFILE
    source = own if own.is_file() else seeds_dir() / "global" / DOCKERFILE
    where = f"global repo {DOCKERFILE}" if own.is_file() else f"choir's default {DOCKERFILE}"
    text = source.read_text(encoding="utf-8")
    found = dockerfile.problems(text, agent=False)
    if found:
        raise ConfigError(
            [f"{DOCKERFILE}: {problem}" for problem in found],
            header=f"the global repo's {DOCKERFILE} is invalid: fix it",
        )
    return text, where


async def ensure_base_image(
    engine: DockerEngine,
    home: ChoirHome,
    *,
    dockerfile_text: str,
    base_os: str,
    global_commit: str,
    on_line: LineFn | None = None,
    on_note: Callable[[str], None] | None = None,
) -> BaseImage:
    """The base image for these inputs, built (and tagged) only if no image has their key."""
    os_image = await engine.image(base_os)
    if os_image is None:
        raise UsageError(
            f"the base OS image {base_os} is not in the local image cache: docker pull it, or "
            "run scripts/ensure-docker (it makes debian:bookworm-slim without a registry)"
        )
    wheels = await asyncio.to_thread(ensure_wheelhouse, home)
    key = digest(dockerfile_text, os_image.id, wheels.key, global_commit)[:16]
    tag = f"{BASE_REPOSITORY}:{key}"
    found = await base_images(engine, {"choir.input": key})
    if found:
        if tag not in found[0].tags:
            await engine.tag(found[0].id, tag)
        return BaseImage(tag, found[0].id, built=False)
    if on_note is not None:
        on_note(f"building {tag} FROM {base_os}")
    labels = {
        **MANAGED,
        "choir.role": "base",
        "choir.input": key,
        "choir.global_commit": global_commit,
    }
    context = await asyncio.to_thread(_context, dockerfile_text, wheels)
    image_id = await engine.build(
        context,
        dockerfile=DOCKERFILE,
        labels=labels,
        buildargs={"BASE_IMAGE": base_os},
        on_line=on_line,
    )
    await engine.tag(image_id, tag)
    await engine.tag(image_id, f"{BASE_REPOSITORY}:latest")
    return BaseImage(tag, image_id, built=True)


async def base_images(
    engine: DockerEngine, labels: dict[str, str] | None = None
) -> list[ImageInfo]:
    """Base images (with `labels`), newest first. Only tagged ones count: every layer of an
    agent build that is still running inherits the base's labels, and taking such a layer for
    the base (or pruning it mid-build) would break that build."""
    found = await engine.images({**MANAGED, "choir.role": "base", **(labels or {})})
    prefix = f"{BASE_REPOSITORY}:"
    return [image for image in found if any(tag.startswith(prefix) for tag in image.tags)]


def _context(dockerfile_text: str, wheels: Wheelhouse) -> bytes:
    context = TarContext()
    context.add_bytes(DOCKERFILE, dockerfile_text.encode())
    context.add_tree("wheels/deps", wheels.deps)
    context.add_tree("wheels/choir", wheels.choir)
    return context.data()
