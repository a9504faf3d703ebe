"""Integration tools in the real choir-agent: offered to the model only when their service and its
secret are configured (a search provider; a Notion integration bound to the session), run with
the session's copy of the key against local stand-ins of Brave Search and Notion (real HTTP), the
key never in a log; called while unconfigured, a clear tool error."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.agent.integrations.tts import is_ogg_opus
from choir.config import SecretStore
from choir.ctl.agent.views import unavailable_lines
from choir.protocol.names import to_wire_name
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.agent_logs import agent_log_text
from tests.harness.brave import BraveServer
from tests.harness.elevenlabs import ElevenLabsServer
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.mail import PASSWORD, USER, SmtpServer, mail_servers
from tests.harness.notion import NotionServer, block, page

pytestmark = pytest.mark.slow

KEY = "brave-e2e-key-7c1f"
NOTION_TOKEN = "secret_notion-e2e-5d2a"
TTS_KEY = "el-e2e-key-93be"
WIRE = to_wire_name("choir.web.search")
NOTION_WIRE = to_wire_name("choir.notion.query")
BROWSER_OFF = (
    "the browser worker is not running: set browser.enabled to true in config.json and "
    "restart choird (choir restart)"
)
PLAN = page("Plan")
SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="search the web",
            calls=[ScriptedCall(name="choir.web.search", arguments={"query": "choir", "count": 2})],
        ),
        ToolCallsStep(
            match="read the plan",
            calls=[
                ScriptedCall(
                    name="choir.notion.query",
                    arguments={"action": "get_page", "page_id": PLAN["url"]},
                )
            ],
        ),
        ToolCallsStep(
            match="say good morning",
            calls=[
                ScriptedCall(
                    name="choir.tts.speak",
                    arguments={"text": "Good morning!", "filename": "morning.ogg"},
                )
            ],
        ),
        ToolCallsStep(
            match="email bob",
            calls=[
                ScriptedCall(
                    name="choir.email.send",
                    arguments={"to": ["bob@example.org"], "subject": "Hi", "body": "Hello Bob."},
                )
            ],
        ),
        ReplyStep(after="tool", repeat=True, text="Here is what I found."),
    ]
)


@dataclass
class Launched:
    agent: Agent
    brave: BraveServer
    eleven: ElevenLabsServer
    smtp: SmtpServer


Start = Callable[..., Awaitable[Launched]]


@pytest.fixture
async def start(root: Path, pg_params: ConnectParams) -> AsyncIterator[Start]:
    async with contextlib.AsyncExitStack() as stack:

        async def launch(*, configured: bool) -> Launched:
            brave = await stack.enter_async_context(BraveServer(KEY))
            notion = await stack.enter_async_context(NotionServer(NOTION_TOKEN))
            notion.add_page(PLAN, [block("heading_1", "Goals"), block("paragraph", "Ship it.")])
            eleven = await stack.enter_async_context(ElevenLabsServer(TTS_KEY))
            mail_root = Path(tempfile.mkdtemp(prefix="choir-mail-"))
            stack.callback(shutil.rmtree, mail_root, ignore_errors=True)
            os.chmod(mail_root, 0o755)
            tls, smtp, imap = stack.enter_context(mail_servers(mail_root))

            model = await stack.enter_async_context(ScriptedModelServer(SCRIPT))
            home = make_home(root, postgres=external_postgres(pg_params))
            data = read_config(home)
            data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
            if configured:
                data["search"] = {"web": {"secret": "brave-key", "endpoint": brave.endpoint}}
                data["notion_integrations"] = {
                    "team": {"secret": "notion-key", "endpoint": notion.endpoint}
                }
                data["tts"] = {
                    "eleven": {"model_id": "m1", "endpoint": eleven.endpoint, "secret": "el-key"}
                }
                data["voice_profiles"] = {
                    "narrator": {
                        "tts": "eleven",
                        "voice_id": "voice-rachel",
                        "output_format": "opus_48000_64",
                    }
                }
                data["email_accounts"] = {
                    "inbox": {
                        "smtp_host": "localhost",
                        "smtp_port": smtp.port,
                        "imap_host": "localhost",
                        "imap_port": imap.imaps_port,
                        "secret": "mail-creds",
                        "ca_cert": tls.ca_pem,
                    }
                }
                defaults = data["agents"]["agent-1"]["defaults"]
                defaults.update(notion="team", voice_profile="narrator", email="inbox")
                store = SecretStore.load(home.secrets_file).with_secret("brave-key", KEY)
                store = store.with_secret("notion-key", NOTION_TOKEN)
                store = store.with_secret("el-key", TTS_KEY)
                store.with_secret("mail-creds", f"{USER}:{PASSWORD}").save(home.secrets_file)
            write_config(home, data)
            (root / "ws").mkdir()
            agent = await stack.enter_async_context(
                running_agent(home, root, model, root / "ws", tree=choir_root(root))
            )
            return Launched(agent, brave, eleven, smtp)

        yield launch


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or []}


def tool_message(body: dict[str, Any], *, last: bool = False) -> dict[str, Any]:
    messages = [m for m in body["messages"] if m["role"] == "tool"]
    if not last:
        assert len(messages) == 1, messages
    content: dict[str, Any] = json.loads(messages[-1]["content"])
    return content


async def test_configured_integrations_run_with_the_sessions_keys(start: Start) -> None:
    launched = await start(configured=True)
    agent, brave, eleven = launched.agent, launched.brave, launched.eleven
    replies = await agent.chat("please search the web for choir")
    assert replies[-1]["text"] == "Here is what I found."

    first, second = [r.body for r in agent.model.requests if r.path.endswith("/completions")][:2]
    assert WIRE in offered(first)
    [request] = brave.requests
    assert (request.token, request.params["q"], request.params["count"]) == (KEY, "choir", "2")
    result = tool_message(second)
    assert result["status"] == "success", result
    assert [r["title"] for r in result["data"]["results"]] == [
        "choir result 0.0",
        "choir result 0.1",
    ]
    assert KEY not in agent_log_text(agent.daemon.home, "agent-1")
    unavailable = (await agent.operator.agent_status("agent-1")).unavailable_tools
    assert "choir.web.search" not in unavailable
    assert "choir.notion.query" not in unavailable
    assert "choir.tts.speak" not in unavailable
    assert unavailable["choir.web.browse"] == BROWSER_OFF

    replies = await agent.chat("now read the plan")
    assert replies[-1]["text"] == "Here is what I found."
    bodies = [r.body for r in agent.model.requests if r.path.endswith("/completions")]
    assert NOTION_WIRE in offered(bodies[2])
    result = tool_message(bodies[3], last=True)
    assert result["status"] == "success", result
    assert result["data"]["content"] == "# Goals\nShip it."
    assert NOTION_TOKEN not in agent_log_text(agent.daemon.home, "agent-1")

    await agent.chat("please say good morning")
    bodies = [r.body for r in agent.model.requests if r.path.endswith("/completions")]
    spoken = tool_message(bodies[5], last=True)
    assert spoken["status"] == "success", spoken
    assert spoken["data"]["path"] == ".choirtmp/send/morning.ogg"
    assert is_ogg_opus((agent.workspace / ".choirtmp" / "send" / "morning.ogg").read_bytes())
    [speech] = eleven.requests
    assert (speech.key, speech.body["text"]) == (TTS_KEY, "Good morning!")
    assert TTS_KEY not in agent_log_text(agent.daemon.home, "agent-1")

    await agent.chat("please email bob")
    bodies = [r.body for r in agent.model.requests if r.path.endswith("/completions")]
    sent = tool_message(bodies[7], last=True)
    assert sent["status"] == "success", sent
    [accepted] = launched.smtp.accepted
    assert (accepted.recipients, accepted.message["Subject"]) == (["bob@example.org"], "Hi")
    assert PASSWORD not in agent_log_text(agent.daemon.home, "agent-1")


async def test_unconfigured_integrations_are_not_offered_and_a_call_says_why(start: Start) -> None:
    launched = await start(configured=False)
    agent, brave = launched.agent, launched.brave
    await agent.chat("please search the web for choir")

    first, second = [r.body for r in agent.model.requests if r.path.endswith("/completions")][:2]
    assert WIRE not in offered(first)
    assert NOTION_WIRE not in offered(first)
    assert to_wire_name("choir.fs.read") in offered(first)
    result = tool_message(second)
    assert result["status"] == "error"
    assert result["error_code"] == "tool_unavailable", result
    assert "no web search provider is configured" in result["summary"]
    assert not brave.requests
    unavailable = (await agent.operator.agent_status("agent-1")).unavailable_tools
    assert unavailable["choir.web.search"] == result["summary"].split(": ", 1)[1]
    lines = unavailable_lines(unavailable)
    pad = " " * 11
    assert "choir.propose.repo_change" not in unavailable  # agent-1 clones its own repo
    email_reason = unavailable["choir.email.send"]
    assert "no email account is bound" in email_reason
    assert lines == [
        f"tools      choir.email.check, choir.email.receive, choir.email.send not offered: "
        f"{email_reason}",
        f"{pad}choir.notion.query not offered: {unavailable['choir.notion.query']}",
        f"{pad}choir.tts.speak not offered: {unavailable['choir.tts.speak']}",
        f"{pad}choir.web.browse not offered: {BROWSER_OFF}",
        f"{pad}choir.web.search not offered: {unavailable['choir.web.search']}",
    ]
