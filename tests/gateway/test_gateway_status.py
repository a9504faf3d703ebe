"""`choirctl gateway status` end to end: a real choird, its bot on the local Bot API server,
a real agent, and the real choirctl in a subprocess (as an operator runs it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.protocol.operator.answers import GatewayDetail
from tests.ctl.cli import Run, choirctl
from tests.harness.botapi import BotApiServer
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import read_config, write_config

from .conftest import BOSS, PHONE, TOKEN

pytestmark = pytest.mark.slow


async def ctl(home: ChoirHome, *args: str) -> Run:
    """`choirctl args` in a subprocess while this loop keeps serving choird."""
    return await asyncio.to_thread(choirctl, home.root, *args)


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {gateway["name"]: gateway for gateway in data["gateways"]}


async def gateways_json(home: ChoirHome) -> dict[str, Any]:
    run = await ctl(home, "gateway", "status", "--json")
    assert (run.code, run.err) == (0, "")
    data: dict[str, Any] = run.json()
    return data


async def test_a_polling_bot_shows_its_dms_agents_and_last_update(
    home: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        api.user_says(PHONE, "echo hi")
        await api.wait_sent(PHONE, 1, within=30)
        data = await gateways_json(home)
        human = await ctl(home, "gateway", "status")
        schema = await ctl(home, "schema", "operator.gateway.status.answer")
        session = (await client.agent_status("agent-1")).session_id

        async def tg() -> GatewayDetail:
            return (await client.gateway_status()).gateways[1]

        api.hold("sendMessage")  # a reply waiting for Telegram is a queued send
        api.user_says(PHONE, "echo two")
        await poll_until(lambda: _is(tg(), queued=1), within=30)
        api.release("sendMessage")
        await api.wait_sent(PHONE, 2, within=30)
        api.fail("getUpdates", 502, count=2)  # an outage: backing off, then polling again
        api.user_says(PHONE, "echo three")
        await api.wait_sent(PHONE, 3, within=30)
        await poll_until(lambda: _is(tg(), state="running", queued=0), within=30)
        recovered = await tg()
        await client.agent_stop("agent-1")

    Draft202012Validator(schema.json()).validate(data)  # --json is what `schema` describes
    assert data["bindings_known"] is True
    tg, console = by_name(data)["tg"], by_name(data)["console"]
    assert (tg["type"], tg["state"], tg["bot"], tg["pending"]) == (
        "telegram", "running", "@choir_test_bot", None
    )  # fmt: skip
    assert tg["last_update_at"] is not None
    assert tg["last_poll_at"] is not None
    assert (tg["queued"], tg["failed"], tg["last_error"]) == (0, 0, None)
    assert tg["secret"] == "tg-token"
    assert [(dm["name"], dm["user_id"], dm["admin"], dm["agent_id"]) for dm in tg["dms"]] == [
        ("boss", str(BOSS), True, None),
        ("phone", str(PHONE), False, "agent-1"),
    ]
    assert tg["dms"][1]["session_id"] == session
    assert (console["state"], console["queued"], console["bot"]) == ("running", None, None)
    assert TOKEN not in json.dumps(data) + human.out

    assert human.code == 0, human.err
    lines = human.out.splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith("tg ")))].startswith(
        "tg (telegram @choir_test_bot): running since "
    )
    assert f"  dm phone    user {PHONE} → agent-1 (session {session})" in lines
    assert f"  dm boss     user {BOSS}, admin → no agent running" in lines
    assert "  sends       0 queued, 0 failed" in lines
    assert "  last error  -" in lines

    assert recovered.last_error == "NetworkError: Bad Gateway"  # kept after it recovered
    assert recovered.last_error_at is not None
    assert recovered.failed == 0


async def _is(detail: Awaitable[GatewayDetail], **fields: object) -> bool:
    got = await detail
    return all(getattr(got, name) == value for name, value in fields.items())


async def test_a_revoked_token_shows_as_such_and_choird_keeps_serving(
    home: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:

        async def polling() -> bool:
            return (await client.gateway_status()).gateways[1].state == "running"

        await poll_until(polling, within=20)
        api.token = "7000001:AAH-the-token-botfather-issued-instead"  # revoked
        api.user_says(PHONE, "hello?")  # wakes the poll in flight; the reply fails: 401

        async def revoked() -> bool:
            tg = (await client.gateway_status()).gateways[1]
            return (tg.state, tg.failed) == ("invalid_token", 1)

        await poll_until(revoked, within=20)
        data = await gateways_json(home)
        human = await ctl(home, "gateway", "status")
        status = await ctl(home, "status")  # choird serves on
        await client.agent_start("agent-1", {"dm": "phone"})
        await client.agent_stop("agent-1")

    tg = by_name(data)["tg"]
    assert tg["state"] == "invalid_token"
    assert tg["last_error"] == "the Bot API rejected the bot's token (401 Unauthorized)"
    assert tg["failed"] == 1  # the "not running" answer to the message, given up at once
    assert TOKEN not in json.dumps(data) + human.out
    assert "tg (telegram @choir_test_bot): invalid_token since " in human.out
    assert (
        "— TOKEN REJECTED (invalid or revoked): set the right one with choirctl secret set "
        "tg-token, then restart choird" in human.out
    )
    assert status.code == 0
    assert "tg (telegram): invalid_token" in status.out


async def test_a_gateway_config_apply_added_is_pending_until_choird_restarts(
    home: ChoirHome,
) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        data = read_config(home)
        data["gateways"]["desk"] = {"type": "console"}
        data["dms"]["desk"] = {"gateway": "desk", "user_id": "desk"}
        write_config(home, data)
        await client.config_load()
        await client.config_apply()
        status = {g.name: g.state for g in (await client.status()).gateways}
        detail = {g.name: g for g in (await client.gateway_status()).gateways}
    assert status == {"console": "running", "desk": "pending_restart", "tg": "running"}
    assert (detail["desk"].state, detail["desk"].pending) == ("pending_restart", "added")
    assert [dm.name for dm in detail["desk"].dms] == ["desk"]
    assert detail["console"].pending is None


async def test_without_choird_it_says_how_to_start_it(home: ChoirHome) -> None:
    run = await ctl(home, "gateway", "status")
    assert run.code == 6
    assert run.err == (
        f"error: choird is not running (no socket at {home.operator_socket}): "
        "start it with `choir up` (or `choird` in the foreground)\n"
    )
    assert (await ctl(home, "gateway", "status", "--json")).code == 6
