"""The Telegram gateway's latency and its rate limits (§19.7), against a local Bot API server.

    python -m bench.telegram [--json] [--quick]

Everything real but Telegram: `choird --runtime process` on a fresh home (`choirctl init`,
embedded Postgres) with a bot `tg` whose `base_url` is the local Bot API server of the tests
(`tests.harness.botapi`, real HTTP, run in this process), agent-1 bound to the DM `phone`
on the zero-latency scripted model, and 50 more DMs with no agent (`f0`…`f49`), each of
whose messages choird answers ("no agent is bound to this DM") through the same outbox.
Times are the server's: from the update it offers to the request it receives.

- `dm_roundtrip_p50_ms`: a phone message ("echo rN") → agent-1's reply arrives as
  sendMessage (getUpdates, choird's inbox, the agent's turn, the model, the reply's
  replication, the outbox). One message a second, so the chat's own pacing never waits.
  `dm_roundtrip_choird_cpu_ms` and `dm_roundtrip_agent_cpu_ms`: the CPU time choird and
  choir-agent spend per round trip (warm-up included), which moves little with the load.
- `callback_while_busy_p95_ms`: agent-1 proposes a tool (an approval message with buttons),
  then is given a turn that takes `BUSY_MS`; mid-turn the user presses [Approve] → the
  bot's answerCallbackQuery arrives.
- `sends_per_s_global`: the 50 DMs each send `FLOOD_MESSAGES` at once; the replies' rate
  from the first to the last as the server receives them (the bot's budget is 25/s).
  `flood_updates_per_s`: how fast choird took those updates in (getUpdates, the handler,
  the stored offset), which bounds the replies' rate from above.
- `rate_limit_violations`: messages over Telegram's limits (per chat about 1/s beyond a burst
  of 5; 30/s in all), as the server counts them, over the whole run.
- `other_chats_delay_on_429_ms`: one chat is answered 429 `retry_after` 5; meanwhile other
  chats write one after the other, and the slowest of their round trips (update → reply) is
  reported: the round trip itself included, so it bounds the delay from above.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import compile_bytecode, parse_args, percentile, report
from bench.step_e2e import agent_process, choird, cpu_s, prepare_home

if TYPE_CHECKING:
    from choir.home import ChoirHome
    from choir.scripted import Script
    from tests.harness.botapi import BotApiServer, Sent

GOALS = {
    "dm_roundtrip_p50_ms": "goal ≤ 60",
    "callback_while_busy_p95_ms": "goal ≤ 200",
    "sends_per_s_global": "goal ≥ 24",
    "rate_limit_violations": "goal = 0",
    "other_chats_delay_on_429_ms": "goal ≤ 100",
}
TOKEN = "7000001:AAH-bench-token-of-the-choir-bot"
PHONE = 4242
"""agent-1's DM's user (and chat) id."""
FLOOD_CHATS = 50
FLOOD_USER = 6000
"""The flood DMs' user ids: FLOOD_USER + n."""
FLOOD_MESSAGES = 4
BUSY_MS = 1500
"""How long agent-1's turn lasts while a button is pressed."""
RETRY_AFTER_S = 5
OTHER_CHATS = 8
"""Chats that write while one waits out its 429."""
FOLD = '{"memory_delta": {"mode": "append", "summary_update": "Chatted."}}'
WAIT_S = 60.0


def script() -> Script:
    from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
    from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
    from tests.harness.proposals import TOOL_PROPOSAL

    proposal = json.loads(json.dumps(TOOL_PROPOSAL))
    proposal["manifest"]["llm"]["name"] = "bench.tool_{1}"  # one tool per round
    return Script(
        steps=[
            ReplyStep(match="Events to fold", repeat=True, text=FOLD),
            ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
            ReplyStep(after="tool", match="proposal submitted", repeat=True, text="Proposed."),
            ToolCallsStep(
                match_regex=r"propose tool (\w+)",
                templated=True,
                repeat=True,
                calls=[ScriptedCall(name="choir.propose.tool", arguments=proposal)],
            ),
            ReplyStep(match="slowly", repeat=True, delay_ms=BUSY_MS, text="done, slowly"),
            ReplyStep(match_regex=r"echo (\w+)", templated=True, repeat=True, text="echo: {1}"),
            ReplyStep(repeat=True, text="I only echo."),
        ]
    )


def telegram_home(home: ChoirHome, base_url: str) -> ChoirHome:
    """`home` with the bot `tg` on `base_url`, the DM `phone` (agent-1's) and the flood DMs."""
    from choir.config import SecretStore

    data = json.loads(home.config_file.read_text())
    data["gateways"]["tg"] = {"type": "telegram", "secret": "tg-token", "base_url": base_url}
    data["dms"]["phone"] = {"gateway": "tg", "user_id": str(PHONE)}
    for n in range(FLOOD_CHATS):
        data["dms"][f"f{n}"] = {"gateway": "tg", "user_id": str(FLOOD_USER + n)}
    data["agents"]["agent-1"]["defaults"]["dm"] = "phone"
    home.config_file.write_text(json.dumps(data, indent=2))
    SecretStore.load(home.secrets_file).with_secret("tg-token", TOKEN).save(home.secrets_file)
    return home


async def reply_at(api: BotApiServer, chat_id: int, text: str, after: int) -> float:
    """When the server received `text` for the chat, among its messages after the first
    `after`."""

    def found() -> float | None:
        calls = api.sends(chat_id)[after:]
        return next((c.at for c in calls if c.params.get("text") == text), None)

    await api.wait_for(lambda: found() is not None, within=WAIT_S)
    at = found()
    assert at is not None
    return at


async def roundtrips(api: BotApiServer, rounds: int) -> list[float]:
    """Phone → agent-1 → phone, one a second (ms each)."""
    samples = []
    for n in range(rounds + 1):
        count = len(api.sends(PHONE))
        began = time.monotonic()
        api.user_says(PHONE, f"echo r{n}")
        arrived = await reply_at(api, PHONE, f"echo: r{n}", count)
        if n:  # the first is a warm-up: the first turn loads what later turns reuse
            samples.append((arrived - began) * 1000)
        await asyncio.sleep(max(0.0, began + 1.05 - time.monotonic()))
    return samples


async def card_of(api: BotApiServer, tool: str) -> Sent:
    def found() -> Sent | None:
        return next((m for m in api.sent(PHONE) if m.buttons and tool in m.text), None)

    await api.wait_for(lambda: found() is not None, within=WAIT_S)
    card = found()
    assert card is not None
    return card


async def presses(api: BotApiServer, rounds: int) -> list[float]:
    """[Approve] pressed while agent-1 is mid-turn: ms until each press is answered."""
    return [await press(api, f"r{n}") for n in range(rounds)]


async def press(api: BotApiServer, tag: str) -> float:
    proposed = api.texts(PHONE).count("Proposed.")
    api.user_says(PHONE, f"propose tool {tag}")
    card = await card_of(api, f"bench.tool_{tag}")
    await api.wait_for(lambda: api.texts(PHONE).count("Proposed.") > proposed, within=WAIT_S)
    done = api.texts(PHONE).count("done, slowly")
    update = api.user_says(PHONE, "answer slowly")
    await api.wait_for(lambda: update not in api.pending_updates, within=WAIT_S)
    await asyncio.sleep(0.3)  # the agent has it: its turn lasts BUSY_MS
    began = time.monotonic()
    pressed = api.user_presses(PHONE, card, card.buttons[0][1])
    await api.wait_for(lambda: api.answer_to(pressed) is not None, within=WAIT_S)
    answer = api.answer_to(pressed)
    if answer is None or answer.text != "Approved":
        raise RuntimeError(f"the press was answered {answer}")
    await api.wait_for(lambda: api.texts(PHONE).count("done, slowly") > done, within=WAIT_S)
    return (answer.at - began) * 1000


async def flood(api: BotApiServer, messages: int) -> tuple[float, float]:
    """Every flood DM sends `messages` at once: the replies' rate and the rate choird took
    the updates in (per s)."""
    chats = range(FLOOD_USER, FLOOD_USER + FLOOD_CHATS)

    def replies() -> list[float]:
        return [c.at for c in api.sends() if int(c.params["chat_id"]) in chats]

    began = time.monotonic()
    last = 0
    for n in range(messages):
        for chat in chats:
            last = api.user_says(chat, f"flood {n}")
    total = FLOOD_CHATS * messages
    await api.wait_for(lambda: len(replies()) >= total, within=WAIT_S)
    times = sorted(replies())
    await api.wait_for(lambda: max(o or 0 for o in api.offsets) > last, within=WAIT_S)
    taken = next(
        c.at
        for c in api.calls
        if c.method == "getUpdates" and int(c.params.get("offset") or 0) > last
    )
    return (len(times) - 1) / (times[-1] - times[0]), total / (taken - began)


async def one_reply(api: BotApiServer, chat_id: int) -> float:
    """A message from the chat and choird's answer: ms from the update to the reply."""
    count = len(api.sends(chat_id))
    began = time.monotonic()
    api.user_says(chat_id, "anyone?")
    await api.wait_for(lambda: len(api.sends(chat_id)) > count, within=WAIT_S)
    return (api.sends(chat_id)[count].at - began) * 1000


async def during_429(api: BotApiServer) -> float:
    """The slowest reply to another chat while one waits out a 429 (ms)."""
    held = FLOOD_USER
    api.fail("sendMessage", 429, retry_after=RETRY_AFTER_S, chat_id=held)
    count = len(api.sends(held))
    api.user_says(held, "hold me")
    await api.wait_for(lambda: len(api.sends(held)) > count, within=WAIT_S)  # the 429
    refused_at = api.sends(held)[count].at
    slowest = 0.0
    for chat in range(1, OTHER_CHATS + 1):
        slowest = max(slowest, await one_reply(api, FLOOD_USER + chat))
    if time.monotonic() - refused_at >= RETRY_AFTER_S:
        raise RuntimeError("the other chats were not answered within the held chat's backoff")
    await api.wait_for(lambda: len(api.sends(held)) > count + 1, within=WAIT_S)
    if api.sends(held)[count + 1].at - refused_at < RETRY_AFTER_S - 0.1:
        raise RuntimeError("the held chat was answered before its retry_after")
    return slowest


@dataclass
class Run:
    roundtrips_ms: list[float]
    choird_cpu_ms: float
    """choird's CPU time per round trip (steadier than wall time on a busy machine)."""
    agent_cpu_ms: float
    presses_ms: list[float]
    sends_per_s: float
    updates_per_s: float
    violations: int
    other_chats_ms: float


async def run(root: Path, *, quick: bool) -> Run:
    from choir.scripted import ScriptedModelServer
    from tests.harness.botapi import BotApiServer

    async with (
        ScriptedModelServer(script(), zero_latency=True) as model,
        BotApiServer(TOKEN) as api,
    ):
        home = telegram_home(prepare_home(root, model.url), api.url)
        async with choird(home) as (daemon, client):
            await client.agent_start("agent-1", {"dm": "phone"})
            rounds = 3 if quick else 20
            agent = agent_process(daemon)
            cpu = cpu_s(daemon), cpu_s(agent)
            samples = await roundtrips(api, rounds)
            cpu_ms = [
                (cpu_s(p) - c) / (rounds + 1) * 1000
                for p, c in zip((daemon, agent), cpu, strict=True)
            ]
            pressed = await presses(api, 2 if quick else 10)
            await asyncio.sleep(3)  # the phone's replies are out: the flood starts on a quiet bot
            rate, taken = await flood(api, 2 if quick else FLOOD_MESSAGES)
            await asyncio.sleep(FLOOD_MESSAGES)  # the flood chats' budgets fill again
            other = await during_429(api)
            await client.agent_stop("agent-1")
        return Run(samples, cpu_ms[0], cpu_ms[1], pressed, rate, taken, len(api.violations), other)


async def measure(quick: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tg-", dir="/tmp") as tmp:
        result = await run(Path(tmp), quick=quick)
    return {
        "dm_roundtrip_p50_ms": statistics.median(result.roundtrips_ms),
        "dm_roundtrip_p95_ms": percentile(result.roundtrips_ms, 95),
        "dm_roundtrip_choird_cpu_ms": result.choird_cpu_ms,
        "dm_roundtrip_agent_cpu_ms": result.agent_cpu_ms,
        "callback_while_busy_p95_ms": percentile(result.presses_ms, 95),
        "sends_per_s_global": result.sends_per_s,
        "flood_updates_per_s": result.updates_per_s,
        "rate_limit_violations": result.violations,
        "other_chats_delay_on_429_ms": result.other_chats_ms,
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    compile_bytecode()
    os.environ.pop("CHOIR_HOME", None)
    figures = asyncio.run(measure(args.quick))
    report("telegram gateway", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
