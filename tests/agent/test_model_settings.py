"""Each model call uses the model and key of the config and secrets snapshots current when it
starts: the settings a lane keeps between calls never outlive a reload (§16.3).

A real kernel, `DynamicState`, LLM client and two scripted model servers on loopback; the
reloads are the swaps choird's pushes make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from choir.adapters.llm.client import LlmClient
from choir.agent.lanes.support import DemoModel, Identity, LaneKit, StatusReporter
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.link import ReconnectingClient
from choir.agent.replication.live_config import DynamicConfig, DynamicState, Secrets
from choir.agent.wiring import open_kernel
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from tests.agent.test_arbiter import UNIMPLEMENTED, limits, make_root
from tests.harness.homes import short_root

ASK = [{"role": "user", "content": "hello"}]


def config(version: int, bound: str, models: dict[str, str]) -> DynamicConfig:
    """A config version binding model `bound`, each model at its server's URL, keyed by `key`."""
    blob: dict[str, Any] = {
        "bindings": {"workspace": "main", "llm": bound, "dm": "console"},
        "models": {
            name: {"provider": "openai", "model": name, "endpoint": url, "secret": "key"}
            for name, url in models.items()
        },
    }
    return DynamicConfig.of(version, blob)


def server(text: str) -> ScriptedModelServer:
    return ScriptedModelServer(Script(steps=[ReplyStep(text=text, repeat=True)]))


async def test_a_reload_takes_effect_at_the_next_call(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with short_root("ms-") as sockets:
        link = ReconnectingClient(sockets / "none.sock", session_id="s-1", lease_token="t")
        async with (
            server("from one") as one,
            server("from two") as two,
            LlmClient() as llm,
            open_kernel(
                make_root(tmp_path), workspace, limits=limits(), runtime_tools=UNIMPLEMENTED
            ) as kernel,
        ):
            models = {"one": one.url, "two": two.url}
            state = DynamicState(
                config(1, "one", models), Secrets.of({"key": SecretStr("sk-first")})
            )
            status = StatusReporter(ControlPlane(link))
            kit = LaneKit(kernel, llm, state, DemoModel(), Identity(), status)

            answers = [(await kit.complete("edge", ASK, [])).text for _ in range(2)]
            state.swap_config(config(2, "two", models))
            answers.append((await kit.complete("edge", ASK, [])).text)
            state.swap_secrets(Secrets.of({"key": SecretStr("sk-second")}))
            answers.append((await kit.complete("edge", ASK, [])).text)
            await status.close()
        await link.close()

    assert answers == ["from one", "from one", "from two", "from two"]
    keys = [request.headers["Authorization"] for request in [*one.requests, *two.requests]]
    assert keys == ["Bearer sk-first", "Bearer sk-first", "Bearer sk-first", "Bearer sk-second"]
