"""The `tools` a lane offers the model: its tools and, with skills installed, the two skill
control tools (or only a running skill state's allowed ones), as the very same entries at every
call — the prompt's size is measured by the identity of its entries (`LanePrompt.size`)."""

from __future__ import annotations

from pathlib import Path

from choir.adapters.llm.client import LlmClient
from choir.agent.lanes.support import DemoModel, Identity, LaneKit
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.link import ReconnectingClient
from choir.agent.replication.live_config import DynamicConfig, DynamicState, Secrets
from choir.agent.replication.status import StatusReporter
from choir.agent.wiring import open_kernel
from choir.core.skills.runner import START_TOOL, TRANSITION_TOOL
from choir.protocol import to_wire_name
from tests.agent.test_arbiter import UNIMPLEMENTED, limits, make_root
from tests.harness.homes import short_root


def names(tools: list[dict[str, object]]) -> list[str]:
    return [str(tool["function"]["name"]) for tool in tools]  # type: ignore[index]


async def test_the_same_entries_are_offered_at_every_call(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with short_root("lt-") as sockets:
        link = ReconnectingClient(sockets / "none.sock", session_id="s-1", lease_token="t")
        async with (
            LlmClient() as llm,
            open_kernel(
                make_root(tmp_path), workspace, limits=limits(), runtime_tools=UNIMPLEMENTED
            ) as kernel,
        ):
            state = DynamicState(DynamicConfig.of(1, {}), Secrets.of({}))
            status = StatusReporter(ControlPlane(link))
            kit = LaneKit(kernel, llm, state, DemoModel(), Identity(), status)
            first, again = kit.tools("edge"), kit.tools("edge")
            only_start = kit.tools("edge", only=[START_TOOL])
            await status.close()
        await link.close()

    controls = [to_wire_name(START_TOOL), to_wire_name(TRANSITION_TOOL)]
    assert names(first)[-2:] == controls
    assert to_wire_name("choir.fs.read") in names(first)
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert names(only_start) == [to_wire_name(START_TOOL)]
    assert only_start[0] is first[-2]
    start = first[-2]["function"]
    assert start["description"].startswith("Start one of your skills")
    assert start["parameters"]["type"] == "object"
