"""The operator API's admin verbs over a real Unix socket: workspaces, model and voice switches,
config and secrets, logs, and the live `subscribe` feed."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from choir.config import SecretStore
from choir.errors import ConfigError, ConflictError, NotFoundError
from choir.protocol import ReportStatusRequest, RequestApprovalRequest, Verb
from choir.protocol.operator.answers import SecretsPushed, SecretView, TtsView
from choir.protocol.operator.items import (
    ConfigChanged,
    FeedItem,
    LogLines,
    LogSnapshotEnd,
    Subscribed,
    SubscribedItem,
)
from choir.protocol.operator.views import ApprovalView, LaneView, SessionEndedView
from choir.store.sessions import get_session
from tests.harness.waits import poll_until

from .conftest import read_config, write_config
from .operator_served import served_api, served_choird, served_home, served_pushes  # noqa: F401  (fixtures)
from .test_operator_api import start


async def test_workspace_list_shows_paths_and_lease_holders(choird, services, home):
    agent = await start(services)

    listed = {w.name: w for w in (await choird.workspace_list()).workspaces}

    assert set(listed) == {"default", "other"}
    assert listed["default"].path == str(home.workspaces / "default")
    assert (listed["default"].leased_to, listed["default"].session_id) == (
        "agent-1",
        agent.session_id,
    )
    assert listed["other"].leased_to is None


async def test_workspace_reset_refuses_a_leased_workspace(choird, services, home):
    agent = await start(services)
    workspace = home.workspaces / "default"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "keep.txt").write_text("x")

    with pytest.raises(ConflictError, match=r"leased to agent-1 .*must be stopped first"):
        await choird.workspace_reset("default")
    assert (workspace / "keep.txt").exists()
    await services.sessions.stop(agent.session_id, "test")
    assert (await choird.workspace_reset("default")).removed == 2  # keep.txt, .choirtmp


async def test_workspace_reset_empties_the_directory_without_following_links(
    choird, home, tmp_path
):
    workspace = home.workspaces / "default"
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "src" / "deep" / "a.py").write_text("x")
    (workspace / ".hidden").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (workspace / "link-out").symlink_to(outside)
    (workspace / "src" / "link-in-tree").symlink_to(outside)

    answer = await choird.workspace_reset("default")

    assert answer.model_dump(mode="json") == {
        "name": "default",
        "path": str(workspace),
        "removed": 4,
    }
    left = sorted(str(path.relative_to(workspace)) for path in workspace.rglob("*"))
    assert left == [".choirtmp", ".choirtmp/recv", ".choirtmp/send"]
    assert (outside / "precious.txt").read_text() == "keep me"
    with pytest.raises(NotFoundError, match=r"no workspace named 'nope'.*default, other"):
        await choird.workspace_reset("nope")


async def test_model_list_marks_the_demo_model(choird):
    listed = await choird.model_list()

    models = {m.name: m for m in listed.models}
    assert models["demo"].demo is True
    assert models["sonnet"].demo is False
    assert models["sonnet"].model == "anthropic/claude-sonnet-4"
    assert listed.tts == [
        TtsView(name="eleven", provider="elevenlabs", model_id="eleven_multilingual_v2")
    ]


async def test_model_set_switches_a_running_agent_until_its_next_start(
    choird, services, pushes, pool
):
    with pytest.raises(ConflictError, match=r"agent-1 is not running: .* --llm sonnet"):
        await choird.model_set("agent-1", "sonnet")
    agent = await start(services)
    assert (await choird.model_get("agent-1")).llm == "demo"

    answer = await choird.model_set("agent-1", "sonnet")

    assert (answer.previous, answer.name, answer.config_version) == ("demo", "sonnet", 2)
    assert pushes.sent[-1] == (agent.session_id, {"kind": "config_changed", "config_version": 2})
    fetched = await agent.ok(Verb.FETCH_DYNAMIC_CONFIG, {"current_config_version": 1})
    assert fetched["config_version"] == 2
    assert fetched["config"]["bindings"]["llm"] == "sonnet"
    secrets = await agent.ok(Verb.GET_SECRETS, {"resources": ["openrouter-key"]})
    assert secrets["secrets"] == {"openrouter-key": "sk-or-1"}
    async with pool.acquire() as conn:
        row = await get_session(conn, agent.session_id)
    assert row is not None
    assert row.resource_bindings["llm"] == "sonnet"
    current = await choird.model_get("agent-1")
    assert (current.llm, current.llm_default, current.llm_overridden) == (
        "sonnet",
        "demo",
        True,
    )
    await services.sessions.stop(agent.session_id, "test")
    restarted = await start(services)
    assert restarted.session_id != agent.session_id
    assert (await choird.model_get("agent-1")).llm == "demo"


async def test_model_set_refuses_unknown_names(choird, services):
    await start(services)
    with pytest.raises(NotFoundError, match=r"no model named 'gpt-9' \(known: demo, sonnet\)"):
        await choird.model_set("agent-1", "gpt-9")
    with pytest.raises(NotFoundError, match=r"no agent named 'ghost'"):
        await choird.model_set("ghost", "demo")


async def test_voice_profiles_are_listed_and_switched(choird, services, home, pushes):
    data = read_config(home)
    data["voice_profiles"]["bright"] = {"tts": "eleven", "voice_id": "voice-2"}
    write_config(home, data)
    await choird.config_load()
    await choird.config_apply()
    agent = await start(services, "agent-2")

    names = [p.name for p in (await choird.voice_list()).voice_profiles]
    assert names == ["bright", "calm"]
    assert (await choird.voice_get("agent-2")).voice_profile == "calm"
    answer = await choird.voice_set("agent-2", "bright")
    assert (answer.previous, answer.name) == ("calm", "bright")
    assert pushes.kinds(agent.session_id)[-1] == "config_changed"
    assert (await choird.voice_get("agent-2")).voice_profile_overridden is True
    with pytest.raises(NotFoundError, match=r"no voice profile named 'loud'"):
        await choird.voice_set("agent-2", "loud")


async def test_config_load_diff_apply_show(choird, services, home, pushes):
    agent = await start(services)
    with pytest.raises(ConflictError, match=r"no config is staged: run choirctl config load"):
        await choird.config_diff()
    data = read_config(home)
    data["models"]["sonnet"]["temperature"] = 0.2
    data["heartbeat_interval_ms"] = 4_000
    write_config(home, data)

    loaded = await choird.config_load()

    assert loaded.staged is True
    paths = [c.path for c in loaded.changes or []]
    assert paths == ["heartbeat_interval_ms", "models.sonnet.temperature"]
    assert all(c.scope == "hot-reload" for c in loaded.changes or [])
    assert (await choird.config_diff()).lines == loaded.lines
    assert "[hot-reload]" in (loaded.lines or [""])[0]

    applied = await choird.config_apply()

    assert applied.config_version == 2
    assert applied.pushed == [agent.session_id]
    assert pushes.sent[-1] == (agent.session_id, {"kind": "config_changed", "config_version": 2})
    shown = await choird.config_show()
    assert shown.config_version == 2
    assert shown.config["models"]["sonnet"]["temperature"] == 0.2
    assert (await choird.status()).config_version == 2


async def test_an_invalid_config_is_reported_whole_and_nothing_is_staged(choird, home):
    data = read_config(home)
    data["agents"]["agent-1"]["defaults"]["llm"] = "missing-model"
    data["heartbeat_interval_ms"] = -1
    write_config(home, data)

    with pytest.raises(ConfigError) as raised:
        await choird.config_load()

    assert len(raised.value.problems) == 2
    assert "missing-model" in " ".join(raised.value.problems)
    assert str(raised.value).startswith("config.json has 2 problem(s):")
    with pytest.raises(ConflictError):
        await choird.config_diff()


async def test_secret_list_names_never_values(choird):
    listed = await choird.secret_list()

    rows = {row.name: row for row in listed.secrets}
    assert rows["openrouter-key"] == SecretView(
        name="openrouter-key", set=True, referenced_by=["models.sonnet.secret"]
    )
    assert "sk-or-1" not in json.dumps(listed.model_dump(mode="json"))
    assert listed.missing == []


async def test_secret_apply_pushes_to_sessions_using_a_changed_secret(choird, services, home):
    first = await start(services)
    second = await start(services, "agent-2")
    store = SecretStore.load(home.secrets_file).with_secret("git-token-2", "ghp-new")
    store.with_secret("unused", "x").save(home.secrets_file)

    answer = await choird.secret_apply()

    assert answer.changed == ["git-token-2", "unused"]
    assert answer.pushed == [
        SecretsPushed(session_id=second.session_id, agent_id="agent-2", secrets=["git-token-2"])
    ]
    assert first.session_id not in {p.session_id for p in answer.pushed or []}
    fetched = await second.ok(Verb.GET_SECRETS, {"resources": ["git-token-2"]})
    assert fetched["secrets"] == {"git-token-2": "ghp-new"}


async def test_secret_apply_refuses_a_readable_secrets_file(choird, home):
    os.chmod(home.secrets_file, 0o644)
    with pytest.raises(ConfigError, match=r"^secrets.json is readable .*: run chmod 600"):
        await choird.secret_apply()


async def test_logs_sends_the_snapshot_then_follows_across_an_archive(choird, home):
    log = home.agent_log("agent-1")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text('{"n": 1}\n{"n": 2}\n')
    lines: list[str] = []
    kinds: list[str] = []

    async def follow() -> None:
        async for item in choird.logs("agent-1"):
            kinds.append(item.kind)
            if isinstance(item, LogLines):
                lines.extend(item.lines)

    reader = asyncio.create_task(follow())
    await poll_until(lambda: "snapshot_end" in kinds)
    assert lines == ['{"n": 1}', '{"n": 2}']
    append(log, '{"n": 3}\n{"n": ')
    await poll_until(lambda: len(lines) == 3)
    append(log, '4}\n{"n": 5}\n')
    archived = home.log_archive / "agent-1" / "x.log"
    archived.parent.mkdir(parents=True)
    os.replace(log, archived)
    log.write_text('{"n": 6}\n')
    await poll_until(lambda: len(lines) == 6)
    reader.cancel()
    assert lines == [f'{{"n": {n}}}' for n in range(1, 7)]
    assert "rotated" in kinds


async def test_logs_without_follow_and_unknown_sources(choird, home):
    home.choird_log.parent.mkdir(parents=True, exist_ok=True)
    home.choird_log.write_text('{"msg": "up"}\n')

    items = [item async for item in choird.logs("choird", follow=False)]

    assert items == [LogLines(lines=['{"msg": "up"}']), LogSnapshotEnd()]
    assert [i async for i in choird.logs("agent-2", follow=False)] == [LogSnapshotEnd()]
    with pytest.raises(NotFoundError, match=r"no log source '../etc': use choird or an agent id"):
        async for _ in choird.logs("../etc", follow=False):
            pass


async def test_subscribe_streams_live_updates(choird, api, services, clock):
    agent = await start(services)
    ctx = await services.sessions.authenticate(agent.session_id, agent.token)
    items: list[FeedItem] = []

    async def listen() -> None:
        async for item in choird.subscribe():
            items.append(item)

    reader = asyncio.create_task(listen())
    await poll_until(lambda: bool(items))
    assert items[0] == SubscribedItem(data=Subscribed(config_version=1))
    state = ReportStatusRequest(lane="edge", state="EDGE_REASONING")
    services.status.report(agent.session_id, state, clock())
    # a budget question: told when answered (an approved tool is told when its phase 1 ends)
    request = RequestApprovalRequest(request_type="budget_extension", payload={})
    approval = (await services.approvals.request(ctx, request)).approval_id
    await choird.approval_approve(approval)
    await choird.model_set("agent-1", "sonnet")
    await services.sessions.stop(agent.session_id, "operator stop")
    await poll_until(lambda: len(items) == 6)
    reader.cancel()

    kinds = [item.kind for item in items[1:]]
    assert kinds == ["lane", "approval", "approval", "config", "session"]
    lane, asked, answered, config, session = (item.data for item in items[1:])
    assert isinstance(lane, LaneView)
    assert lane.state == "EDGE_REASONING"
    assert isinstance(asked, ApprovalView)
    assert (asked.approval_id, asked.status) == (
        approval,
        "pending",
    )
    assert isinstance(answered, ApprovalView)
    assert (answered.approval_id, answered.status) == (approval, "approved")
    assert isinstance(config, ConfigChanged)
    assert config.config_version == 2
    assert session == SessionEndedView(
        session_id=agent.session_id, agent_id="agent-1", status="stopped", reason="operator stop"
    )
    await poll_until(lambda: api.feed.reader_count == 0)


def append(path: Path, text: str) -> None:
    with path.open("a") as file:
        file.write(text)
