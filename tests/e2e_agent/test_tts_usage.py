"""TTS calls as usage rows (issue 19): a real choir-agent speaks through the local ElevenLabs
stand-in; the characters billed and their cost at `tts.<provider>.price` become one usage row of
kind `tts`, and the cost counts towards the agent's spend cap in the running session — the
model call after the speech asks to pass the cap, and a rejection ends the reply.

choird in the test process on the test session's Postgres, the real `choir-agent`, the scripted
model (no price: its calls' cost is unknown and counts towards no cap).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.config import SecretStore
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import choirctl
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.e2e_agent.test_budget_ask import question
from tests.harness.chat import replies_through
from tests.harness.elevenlabs import ElevenLabsServer
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.waits import poll_until

pytestmark = pytest.mark.slow

TTS_KEY = "el-usage-key-41c7"
SPOKEN = "Good morning, Ada!"
PER_MILLION_CHARACTERS = 500_000.0
"""$0.50 a character: one greeting passes the $5 cap."""
SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="say good morning",
            calls=[ScriptedCall(name="choir.tts.speak", arguments={"text": SPOKEN})],
        ),
        ReplyStep(after="tool", repeat=True, text="Said it."),
        ReplyStep(match="hello", repeat=True, text="Hello."),
    ]
)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
async def agent(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> AsyncIterator[Agent]:
    async with ElevenLabsServer(TTS_KEY) as eleven:
        home = make_home(root, postgres=external_postgres(pg_params))
        data = read_config(home)
        data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
        data["tts"] = {
            "eleven": {
                "model_id": "eleven_flash_v2_5",
                "endpoint": eleven.endpoint,
                "secret": "el-key",
                "price": {"characters": PER_MILLION_CHARACTERS},
            }
        }
        data["voice_profiles"] = {
            "narrator": {
                "tts": "eleven",
                "voice_id": "voice-rachel",
                "output_format": "opus_48000_64",
            }
        }
        data["agents"]["agent-1"]["defaults"]["voice_profile"] = "narrator"
        data["agents"]["agent-1"]["spend_cap"] = {"day_usd": 5.0}
        write_config(home, data)
        SecretStore.load(home.secrets_file).with_secret("el-key", TTS_KEY).save(home.secrets_file)
        (root / "ws").mkdir()
        async with running_agent(home, root, model, root / "ws", tree=choir_root(root)) as agent:
            yield agent


async def test_a_tts_call_is_a_usage_row_and_counts_towards_the_cap(agent: Agent) -> None:
    operator, cost = agent.operator, len(SPOKEN) * PER_MILLION_CHARACTERS / 1e6
    sent = await operator.chat_send("agent-1", "please say good morning")
    # the speech was made and billed; the model call after it meets the cap, which asks
    asked = await question(agent)
    assert asked.payload["budget"] == "spend_cap_day_usd"
    await operator.approval_reject(asked.approval_id)
    replies = await replies_through(
        operator, sent.after_seq, lambda r: r["category"] == "error", within=30
    )
    assert "spend cap reached" in replies[-1]["text"]
    assert f"${cost:,.2f} today" in replies[-1]["text"]

    async def recorded() -> bool:
        return (await operator.usage(kind="tts")).total.calls == 1

    await poll_until(recorded, within=10)
    [row] = (await operator.usage(kind="tts", by="model")).rows
    assert (row.key, row.calls, row.characters) == ("eleven_flash_v2_5", 1, len(SPOKEN))
    assert (row.cost_usd, row.unknown_cost_calls) == (pytest.approx(cost), 0)
    assert row.prompt_tokens == row.completion_tokens == 0
    kinds = {r.key: r for r in (await operator.usage(by="kind")).rows}
    assert set(kinds) == {"llm", "tts"}
    assert kinds["llm"].cost_usd is None  # the demo model: unknown, counted towards no cap
    [spend] = (await operator.usage(agent_id="agent-1")).spend
    assert spend.day_usd == pytest.approx(cost)
    assert spend.cap_reached is not None

    shown = await asyncio.to_thread(
        choirctl, agent.daemon.home.root, "usage", "--kind", "tts", "--by", "model"
    )
    assert shown.code == 0, shown.err
    header, line = shown.out.splitlines()[:2]
    headers = ["model", "calls", "prompt", "cached", "completion", "chars", "avg"]
    assert header.lower().split()[:7] == headers
    assert line.split()[0:6] == ["eleven_flash_v2_5", "1", "0", "0", "0", str(len(SPOKEN))]
    assert line.split()[-1] == f"${cost:.4f}"
