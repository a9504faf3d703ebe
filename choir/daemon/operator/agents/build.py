"""`agent.build` (§17.3): build the agent's image if anything changed, streaming each step.

Items are `progress`'s: `{kind: "progress", agent_id, phase: "build", total, step,
title, detail, log}` while the build runs (a `log` item is one line of docker build output),
then `{kind: "result", result: {...}}` naming the image. A failed build is the stream's error:
its message ends with the build's last lines, and the previous image stays the one to run.
The running config is built, the one `agent start` would use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.progress import Report, reporting
from choir.protocol.base import WireModel
from choir.protocol.operator.answers import ImageBuilt
from choir.protocol.operator.items import BuildResult, Progress
from choir.protocol.operator.requests import AgentRef

if TYPE_CHECKING:  # the builder loads the Docker SDK: only when a build is asked for
    from choir.daemon.images.build import BuildProgress, ImageRef


async def agent_build(ctx: OperatorContext, request: AgentRef) -> AsyncIterator[WireModel]:
    """Stream the build of `request.agent_id`'s image; an unknown agent is refused first."""
    ctx.require_agent(request.agent_id)
    return reporting(
        lambda report: build_one(ctx, request.agent_id, report),
        lambda image: BuildResult(result=image),
    )


async def build_one(ctx: OperatorContext, agent_id: str, report: Report) -> ImageBuilt:
    from choir.daemon.images.build import TOTAL_STEPS, ensure_agent_image

    def progress(item: BuildProgress) -> None:
        report(Progress(agent_id=agent_id, phase="build", total=TOTAL_STEPS, **vars(item)))

    image = await ensure_agent_image(ctx.home, ctx.config, agent_id, progress)
    return image_view(agent_id, image)


def image_view(agent_id: str, image: ImageRef) -> ImageBuilt:
    """The result of a build."""
    return ImageBuilt(
        agent_id=agent_id,
        tag=image.tag,
        image_id=image.id,
        built=image.built,
        version=image.version.model_dump(mode="json"),
    )
