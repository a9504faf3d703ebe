"""choirctl's choird commands, run as the real CLI against a real operator socket.

The test process serves `OperatorApi` on `$CHOIR_HOME/socks/choird.sock` over embedded Postgres;
each `choirctl` runs in a subprocess (from a thread, so the event loop keeps serving) with
CHOIR_HOME pointing there, and its output and exit code are checked as an operator sees them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

from choir.daemon.agents.services import AgentServices
from choir.home import ChoirHome
from choir.protocol import ReportStatusRequest, RequestApprovalRequest, Verb
from tests.daemon.agent import AgentClient, Chain
from tests.daemon.conftest import read_config, write_config
from tests.daemon.operator_served import Operator, served_operator  # noqa: F401  (fixture)
from tests.harness.proposals import TOOL_PROPOSAL

from .cli import REPO_ROOT, Run, start_choirctl

_ENTRY = """
import sys

sys.argv[0] = "choirctl"
from choir.ctl.app import main
main()
"""
"""The real entry point, run from the source tree."""


def _command(home: ChoirHome, *args: str) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k != "CHOIR_HOME"}
    env.update(CHOIR_HOME=str(home.root), PYTHONPATH=str(REPO_ROOT), COLUMNS="200")
    return [sys.executable, "-c", _ENTRY, *args], env


def _run(home: ChoirHome, *args: str) -> Run:
    command, env = _command(home, *args)
    done = subprocess.run(
        command, input="", capture_output=True, text=True, env=env, check=False, timeout=60
    )
    return Run(done.returncode, done.stdout, done.stderr)


async def choirctl(home: ChoirHome, *args: str) -> Run:
    """`choirctl args` in a subprocess while this loop keeps serving choird."""
    return await asyncio.to_thread(_run, home, *args)


async def start(services: AgentServices, agent_id: str = "agent-1") -> AgentClient:
    return AgentClient(services, await services.sessions.start(agent_id, {}))


async def test_without_choird_commands_say_how_to_start_it(tmp_path):
    home = ChoirHome(tmp_path / "home")
    run = await choirctl(home, "status")

    assert run.code == 6
    assert run.err == (
        f"error: choird is not running (no socket at {home.operator_socket}): "
        "start it with `choir up` (or `choird` in the foreground)\n"
    )
    assert (await choirctl(home, "session", "list", "--json")).code == 6


async def test_status_human_and_json(operator: Operator):
    home, services = operator.home, operator.services
    await start(services)

    human = await choirctl(home, "status")
    data = (await choirctl(home, "status", "--json")).json()

    assert human.code == 0, human.err
    assert "postgres  ok (" in human.out
    assert "agents    1 of 2 running" in human.out
    assert "config    v1 (hash " in human.out
    assert (data["agents"], data["postgres"]["state"]) == (
        {"total": 2, "running": 1, "interrupted": []},
        "ok",
    )


async def test_agent_list_and_status(operator: Operator):
    home, services, clock = operator.home, operator.services, operator.clock
    agent = await start(services)
    services.status.report(
        agent.session_id,
        ReportStatusRequest(lane="edge", state="EDGE_REASONING", skill="code_review"),
        clock(),
    )

    listing = await choirctl(home, "agent", "list")
    detail = await choirctl(home, "agent", "status", "agent-1")
    as_json = (await choirctl(home, "agent", "status", "agent-1", "--json")).json()
    missing = await choirctl(home, "agent", "status", "ghost")

    assert listing.out.splitlines()[0].split() == [
        "AGENT", "STATE", "SESSION", "UPTIME", "CONFIG", "WORKSPACE", "LLM", "DM", "RUNTIME"
    ]  # fmt: skip
    assert listing.out.splitlines()[1].split()[:3] == ["agent-1", "running", agent.session_id]
    assert listing.out.splitlines()[2].split()[:3] == ["agent-2", "stopped", "-"]
    assert detail.code == 0, detail.err
    assert "skill      code_review" in detail.out
    assert "EDGE_REASONING" in detail.out
    assert as_json["lanes"][0]["state"] == "EDGE_REASONING"
    assert (missing.code, missing.err.count("\n")) == (4, 1)
    assert missing.err.startswith("error: no agent named 'ghost'")


async def test_session_commands(operator: Operator):
    home, services, pushes, clock = (
        operator.home,
        operator.services,
        operator.pushes,
        operator.clock,
    )
    agent = await start(services)
    chain = Chain()
    chain.commit(4)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    services.status.report(
        agent.session_id, ReportStatusRequest(lane="core:fix-bug", state="CORE_REASONING"), clock()
    )
    sid = agent.session_id

    listing = await choirctl(home, "session", "list", "agent-1")
    events = await choirctl(home, "session", "events", sid, "-n", "2")
    events_json = (
        await choirctl(home, "session", "events", sid, "--from-rev", "3", "--json")
    ).json()
    cores = await choirctl(home, "session", "cores", sid)
    cancel = await choirctl(home, "session", "cancel", sid, "fix-bug")
    unknown_job = await choirctl(home, "session", "cancel", sid, "nope")
    inject = await choirctl(home, "session", "inject", sid, "fix-bug", "keep the old page")
    compact = await choirctl(home, "session", "compact", sid, "--lane", "edge")

    assert listing.out.splitlines()[1].split()[:3] == [sid, "agent-1", "active"]
    assert [line.split()[0] for line in events.out.splitlines()] == ["3", "4"]
    assert events.out.splitlines()[1].split()[4:] == ["user_msg", '{"text":"hello', '4"}']
    assert [e["rev"] for e in events_json["events"]] == [3, 4]
    assert cores.out.splitlines()[1].split()[:2] == ["fix-bug", "CORE_REASONING"]
    assert cancel.out == f"asked session {sid} to cancel core job fix-bug\n"
    assert unknown_job.code == 4
    assert inject.out == f"asked session {sid} to instruct core job fix-bug\n"
    assert compact.out == f"asked session {sid} to compact lane edge\n"
    assert pushes.kinds(sid) == ["core_cancel", "core_inject", "compact"]
    await services.sessions.stop(sid, "test")
    ended = await choirctl(home, "session", "compact", sid)
    assert (ended.code, ended.err) == (
        5,
        f"error: session {sid} is not active (it is stopped): "
        "start agent-1 with choirctl agent start agent-1\n",
    )


async def test_session_events_follow_ends_with_the_session(operator: Operator):
    home, services = operator.home, operator.services
    agent = await start(services)
    chain = Chain()
    chain.commit(2)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))

    command, env = _command(home, "session", "events", agent.session_id, "-f")
    follower = await asyncio.create_subprocess_exec(
        *command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert follower.stdout is not None
    try:
        # Each step waits for what the follower printed (a fixed sleep guessed how long
        # choirctl takes to start, which parallel test load made wrong).
        async with asyncio.timeout(30):
            shown = [await follower.stdout.readline() for _ in range(2)]  # the history
            chain.commit(1)
            await agent.ok(Verb.HEARTBEAT, chain.heartbeat(2))
            shown.append(await follower.stdout.readline())  # followed live
            await services.sessions.stop(agent.session_id, "test")
            rest, err = await follower.communicate()
    finally:
        if follower.returncode is None:
            follower.kill()
            await follower.wait()

    assert follower.returncode == 0, err.decode()
    assert rest == b""
    assert [line.split()[0] for line in shown] == [b"1", b"2", b"3"]


async def test_approval_commands(operator: Operator):
    home, services = operator.home, operator.services
    agent = await start(services)
    ctx = await services.sessions.authenticate(agent.session_id, agent.token)
    payload = {**TOOL_PROPOSAL, "summary": "run migrations"}
    request = RequestApprovalRequest(request_type="tool", payload=payload)
    approval_id = (await services.approvals.request(ctx, request)).approval_id

    listing = await choirctl(home, "approval", "list")
    shown = await choirctl(home, "approval", "show", approval_id)
    approved = await choirctl(home, "approval", "approve", approval_id)
    again = await choirctl(home, "approval", "reject", approval_id)
    everything = (await choirctl(home, "approval", "list", "--all", "--json")).json()

    assert listing.out.splitlines()[1].split()[:4] == [approval_id, "agent-1", "tool", "pending"]
    assert "run migrations" in listing.out
    assert '"summary": "run migrations"' in shown.out
    assert approved.out == f"approval {approval_id} approved\n"
    assert (again.code, again.err) == (5, f"error: approval {approval_id} is already approved\n")
    assert [a["status"] for a in everything["approvals"]] == ["approved"]
    assert (await choirctl(home, "approval", "list")).out == "(none)\n"


async def test_workspace_commands(operator: Operator):
    home, services = operator.home, operator.services
    agent = await start(services)
    workspace = home.workspaces / "default"
    (workspace / "notes.txt").write_text("x")

    listing = await choirctl(home, "workspace", "list")
    leased = await choirctl(home, "workspace", "reset", "default", "--yes")
    await services.sessions.stop(agent.session_id, "test")
    unconfirmed = await choirctl(home, "workspace", "reset", "default")
    reset = await choirctl(home, "workspace", "reset", "default", "--yes")

    assert listing.out.splitlines()[1].split() == [
        "default", str(workspace), "agent-1", agent.session_id
    ]  # fmt: skip
    assert leased.code == 5
    assert "must be stopped first (choirctl agent stop agent-1)" in leased.err
    assert (unconfirmed.code, unconfirmed.err) == (
        2,
        f"error: workspace reset deletes every file in {workspace}: pass --yes to confirm\n",
    )
    assert reset.out == f"workspace default reset: 2 entries removed from {workspace}\n"
    assert not (workspace / "notes.txt").exists()


async def test_model_and_voice_commands(operator: Operator):
    home, services, pushes = operator.home, operator.services, operator.pushes
    agent = await start(services)
    second = await start(services, "agent-2")

    models = await choirctl(home, "model", "list")
    before = await choirctl(home, "model", "get", "agent-1")
    switched = await choirctl(home, "model", "set", "agent-1", "--llm", "sonnet")
    unknown = await choirctl(home, "model", "set", "agent-1", "--llm", "gpt-9")
    after = (await choirctl(home, "model", "get", "agent-1", "--json")).json()
    voices = await choirctl(home, "voice", "list")
    voice = await choirctl(home, "voice", "get", "agent-2")

    assert "demo (not a real LLM)" in models.out
    assert (
        "TTS providers:\nNAME    PROVIDER    MODEL ID\neleven  elevenlabs  eleven_multilingual_v2"
        in (models.out)
    )
    assert "llm    demo (demo model, not a real LLM)" in before.out
    assert switched.out == "agent-1 now uses sonnet (was demo) until its next start; config v2\n"
    assert (unknown.code, unknown.err.startswith("error: no model named 'gpt-9'")) == (4, True)
    assert (after["llm"], after["llm_overridden"]) == ("sonnet", True)
    assert pushes.kinds(agent.session_id) == ["config_changed"]
    assert voices.out.splitlines()[1].split() == ["calm", "eleven", "voice-1", "mp3_44100_128"]
    assert voice.out.splitlines() == ["agent-2 (running)", "voice  calm"]
    stopped = await choirctl(home, "voice", "set", "agent-1", "calm")
    assert stopped.code == 0
    await services.sessions.stop(second.session_id, "test")
    refused = await choirctl(home, "voice", "set", "agent-2", "calm")
    assert (refused.code, "agent-2 is not running" in refused.err) == (5, True)


async def test_config_commands(operator: Operator):
    home, services, pushes = operator.home, operator.services, operator.pushes
    agent = await start(services)
    data = read_config(home)
    data["models"]["sonnet"]["temperature"] = 0.3
    write_config(home, data)

    nothing = await choirctl(home, "config", "diff")
    loaded = await choirctl(home, "config", "load")
    diff = await choirctl(home, "config", "diff", "--json")
    applied = await choirctl(home, "config", "apply")
    shown = await choirctl(home, "config", "show")

    assert (nothing.code, nothing.err) == (
        5,
        "error: no config is staged: run choirctl config load first\n",
    )
    assert loaded.code == 0, loaded.err
    assert loaded.out.startswith("config staged (hash ")
    assert "~ config.json: models.sonnet.temperature  [hot-reload]" in loaded.out
    assert diff.json()["changes"][0]["path"] == "models.sonnet.temperature"
    assert applied.out.startswith("config v2 applied (1 change); 1 running session(s) told")
    assert pushes.sent[-1] == (agent.session_id, {"kind": "config_changed", "config_version": 2})
    assert shown.out.startswith("# config v2, hash ")
    assert json.loads(shown.out.split("\n", 1)[1])["models"]["sonnet"]["temperature"] == 0.3


async def test_an_invalid_config_load_lists_every_problem(operator: Operator):
    home = operator.home
    data = read_config(home)
    data["agents"]["agent-1"]["defaults"]["llm"] = "missing"
    data["heartbeat_interval_ms"] = 0
    write_config(home, data)

    run = await choirctl(home, "config", "load")

    assert run.code == 3
    lines = run.err.splitlines()
    assert lines[0] == "error: config.json has 2 problem(s):"
    assert len(lines) == 3


async def test_secret_apply(operator: Operator):
    home, services = operator.home, operator.services
    from choir.config import SecretStore

    second = await start(services, "agent-2")
    SecretStore.load(home.secrets_file).with_secret("notion-key", "ntn-2").save(home.secrets_file)

    run = await choirctl(home, "secret", "apply")
    os.chmod(home.secrets_file, 0o644)
    refused = await choirctl(home, "secret", "apply")

    assert run.out.splitlines() == [
        "secrets reloaded in choird (8 set); changed: notion-key",
        f"  agent-2 (session {second.session_id}) refreshes notion-key",
    ]
    assert refused.code == 3
    assert "chmod 600" in refused.err


async def test_logs_snapshot_and_follow_until_interrupted(operator: Operator):
    """Also after other tests in this process left its log growing without end: a stream that
    never runs dry must still let Ctrl-C in (it did not: `queue.get` never suspended). Ctrl-C at
    other moments and in other states: test_interrupt."""
    home = operator.home
    home.choird_log.parent.mkdir(parents=True, exist_ok=True)
    home.choird_log.write_text('{"msg": "one"}\n')

    snapshot = await choirctl(home, "logs", "choird", "--no-follow")
    unknown = await choirctl(home, "logs", "nobody-here", "--no-follow")
    process = await start_choirctl(home.root, "logs", "choird")
    assert process.stdout is not None
    first = await asyncio.wait_for(process.stdout.readline(), 30)
    with home.choird_log.open("a") as log:
        log.write('{"msg": "two"}\n')
    second = await asyncio.wait_for(process.stdout.readline(), 30)
    process.send_signal(signal.SIGINT)
    try:  # drained: a full pipe cannot hold it
        _, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    assert snapshot.out == '{"msg": "one"}\n'
    assert (unknown.code, "use choird or an agent id" in unknown.err) == (4, True)
    assert (first, second) == (b'{"msg": "one"}\n', b'{"msg": "two"}\n')
    assert (process.returncode, err) == (130, b"")


def test_operator_command_modules_import_nothing_heavy() -> None:
    """`choirctl --help` imports every noun: the client and transport load only when one runs."""
    probe = (
        "import sys\n"
        "import choir.ctl.operator_nouns as nouns, typer\n"
        "nouns.register_operator_nouns(typer.Typer())\n"
        "heavy = ('pydantic', 'choir.config', 'choir.transport', 'choir.client', 'watchfiles')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        ((), ["status", "logs", "session", "approval", "workspace", "model", "voice"]),
        (("session",), ["list", "events", "cores", "cancel", "inject", "compact"]),
        (("session", "events"), ["--follow", "--from-rev", "--limit", "--json"]),
        (("workspace", "reset"), ["--yes", "terminal"]),
        (("logs",), ["--no-follow", "Ctrl-C"]),
        (("config",), ["check", "load", "diff", "apply", "show"]),
        (("secret",), ["apply"]),
        (("agent",), ["init", "list", "status"]),
        (("model", "set"), ["--llm", "next start"]),
    ],
)
def test_help_of_operator_commands(tmp_path, args: tuple[str, ...], mentions: list[str]) -> None:
    run = _run(ChoirHome(tmp_path), *args, "--help")
    assert run.code == 0, run.err
    for word in mentions:
        assert word in run.out
