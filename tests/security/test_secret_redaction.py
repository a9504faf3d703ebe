"""Secret values a tool prints never leave the agent, and choird's logs redact every loaded secret.

Three layers, all real:
- the kernel: an external tool (given the git token through its `secret_resources`) prints the
  token raw, JSON-escaped, percent-encoded in a URL and inside a base64 `Authorization: Basic`
  header; the committed events, the result the lane gets back and the chain hold `[REDACTED]`;
- end to end: real choird (Postgres), the real `choir-agent` process and a scripted model server.
  Edge runs that tool and `git credential fill` through `choir.exec`; Postgres rows, every
  request the model server received and `choirctl session events` show the marker, never the
  token or its base64 form;
- choird: a session's TERMINATE_SELF reason holding a secret from secrets.json is logged by
  choird (`session ended`) with the secret redacted — also one rotated in by `secret apply`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from choir.agent.kernel.proposal import ToolProposal
from choir.agent.wiring import open_kernel
from choir.client import ChoirClient
from choir.config import Budgets, SecretStore
from choir.core.budgets import BudgetLimits
from choir.home import ChoirHome
from choir.logs import setup_logging, shutdown_logging
from choir.logs.redaction import REDACTED, mentions_secret, redact, replace_secrets
from choir.protocol import TerminateSelfRequest
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.daemons import agent_control_plane, poll_until, running_daemon, stored_events
from tests.harness.homes import GIT_TOKEN, scripted_home

SEEDS = Path(__file__).parents[2] / "seeds" / "global"
BIN = Path(sys.executable).parent

LEAK = """#!/usr/bin/env python3
import base64, json, sys
request = json.load(sys.stdin)
[token] = request["secrets"].values()
basic = base64.b64encode(("x-access-token:" + token).encode()).decode()
print(json.dumps({
    "status": "success",
    "summary": "the token is " + token,
    "data": {
        "header": "Authorization: Basic " + basic,
        "url": "https://x:" + request["arguments"]["quoted"] + "@github.com/org/repo.git",
        "nested": [{"token": token, token: 1}],
    },
}))
"""

LEAK_MANIFEST = {
    "llm": {
        "name": "test.leak",
        "description": "Print the git token in several forms (test tool).",
        "parameters": {
            "type": "object",
            "properties": {"quoted": {"type": "string"}},
            "required": ["quoted"],
            "additionalProperties": False,
        },
    },
    "runtime": {
        "implementation": "external",
        "exec_path": "/choir/tools/agent/test.leak",
        "timeout_ms": 10_000,
        "secret_resources": ["git_identity"],
        "side_effect": "read",
        "idempotent": True,
    },
}


def forms(token: str) -> list[str]:
    """The token as tools print it: raw, and the base64 of a Basic auth header's credentials."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return [token, basic]


def install_leak(tree: Path) -> Path:
    tools = tree / "tools" / "agent"
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "test.leak.json").write_text(json.dumps(LEAK_MANIFEST))
    script = tools / "test.leak"
    script.write_text(LEAK)
    script.chmod(0o755)
    return tree


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    """The redaction registry is process-wide: every test starts and ends with it empty."""
    replace_secrets([])
    yield
    replace_secrets([])


# -- the kernel --------------------------------------------------------------------------------


async def test_the_kernel_commits_a_printed_secret_redacted_in_every_form(tmp_path: Path) -> None:
    token = 'tok-"quoted"/slash\\back+plus-0123456789'
    tree = tmp_path / "choir"
    shutil.copytree(SEEDS / "tools", tree / "tools" / "global")
    install_leak(tree)
    (tmp_path / "ws").mkdir()
    replace_secrets([token])  # as the agent does with what GET_SECRETS returned
    runtime = frozenset({"choir.core.spawn", "choir.core.inject", "choir.core.cancel"})
    runtime |= {"choir.core.list", "choir.core.report", "choir.memory.compact"}
    runtime |= {"choir.email.send", "choir.email.receive", "choir.email.check"}
    runtime |= {"choir.notion.query", "choir.tts.speak", "choir.web.search"}
    bound = {"git_identity": {"git-token": token}}
    async with open_kernel(
        tree,
        tmp_path / "ws",
        limits=BudgetLimits(**Budgets().model_dump()),
        runtime_tools=runtime,
        secrets=lambda: bound,
    ) as kernel:
        proposal = ToolProposal("edge", "c-1", "test.leak", {"quoted": quote(token, safe="")})
        result = await kernel.arbiter.propose(proposal)
        entries = list(kernel.log)
        kernel.log.verify()
    everything = json.dumps([e.event for e in entries]) + result.model_dump_json()
    for form in [*forms(token), quote(token, safe=""), json.dumps(token)[1:-1]]:
        assert form not in everything, form
    assert result.status == "success"
    assert result.summary == f"the token is {REDACTED}"
    assert result.data["nested"] == [{"token": REDACTED, REDACTED: 1}]
    assert REDACTED in result.data["header"]
    assert REDACTED in result.data["url"]
    committed = entries[-1].event["result"]
    assert committed == result.model_dump(mode="json")
    [requested] = [e for e in entries if e.kind == "tool_call_requested"]
    assert requested.event["arguments"] == {"quoted": REDACTED}
    assert proposal.arguments == {"quoted": quote(token, safe="")}  # the lane's copy untouched


def test_an_event_without_a_secret_is_committed_as_it_is() -> None:
    from choir.agent.kernel.commitlog import CommitLog

    replace_secrets(["a-secret-value-123"])
    event = {"kind": "user_msg", "text": "hello", "attachments": [], "message_id": None}
    assert CommitLog().append("edge", event).event is event


# -- end to end --------------------------------------------------------------------------------

SCRIPT = Script(
    description="edge runs two tools that print the git token",
    steps=[
        ToolCallsStep(
            match="show me the token",
            calls=[
                ScriptedCall(name="test.leak", arguments={"quoted": "nothing-secret"}),
                ScriptedCall(
                    name="choir.exec",
                    arguments={
                        "command": "printf 'protocol=https\\nhost=github.com\\n\\n'"
                        " | git credential fill"
                    },
                ),
            ],
        ),
        ReplyStep(after="tool", text="Both tools ran."),
    ],
)


@pytest.fixture
async def agent(root: Path, pg_params: ConnectParams) -> AsyncIterator[Agent]:
    async with ScriptedModelServer(SCRIPT) as model:
        home = scripted_home(root, pg_params, model.url)
        workspace = root / "ws"
        workspace.mkdir()
        async with running_agent(
            home, root, model, workspace, tree=install_leak(choir_root(root))
        ) as agent:
            yield agent


async def choirctl(home: ChoirHome, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(BIN / "choirctl"),
        *args,
        env={**os.environ, "CHOIR_HOME": str(home.root)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.slow
async def test_a_printed_secret_reaches_no_event_row_prompt_or_cli(agent: Agent) -> None:
    replies = await agent.chat("please show me the token")
    assert replies[-1]["text"] == "Both tools ran."

    async def results_stored() -> bool:
        events = await stored_events(agent.daemon, agent.session_id)
        return sum(e.event_type == "tool_result_committed" for e in events) == 2

    await poll_until(results_stored, within=10)
    rows = await stored_events(agent.daemon, agent.session_id)
    results = {
        e.payload["tool"]: e.payload["result"]
        for e in rows
        if e.event_type == "tool_result_committed"
    }
    assert results["test.leak"]["summary"] == f"the token is {REDACTED}"
    assert f"password={REDACTED}" in json.dumps(results["choir.exec"])

    stored = json.dumps([e.payload for e in rows])
    prompts = json.dumps([r.body for r in agent.model.requests])
    listed = await choirctl(agent.daemon.home, "session", "events", agent.session_id, "--json")
    shown = await choirctl(agent.daemon.home, "session", "events", agent.session_id)
    for where, text in {"postgres": stored, "prompts": prompts, "cli": listed}.items():
        assert REDACTED in text, where
        for form in forms(GIT_TOKEN):
            assert form not in text, (where, form)
    assert GIT_TOKEN not in shown  # the table view cuts payloads short: --json shows the marker


# -- choird's own logs -------------------------------------------------------------------------

CANARY = "canary-choird-secret-5e1d"
ROTATED = "canary-rotated-secret-9a2b"


@pytest.mark.slow
async def test_choird_redacts_every_secret_it_loaded_from_its_logs(
    root: Path, pg_params: ConnectParams
) -> None:
    home = scripted_home(root, pg_params, "http://127.0.0.1:9/v1")
    store = SecretStore.load(home.secrets_file).with_secret("notion-key", CANARY)
    store.save(home.secrets_file)
    setup_logging(home, "choird")
    try:
        async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
            assert daemon.services is not None
            await end_session_saying(daemon, f"tool said {CANARY}")
            store.with_secret("notion-key", ROTATED).save(home.secrets_file)
            await operator.secret_apply()
            await end_session_saying(daemon, f"tool said {ROTATED}")
    finally:
        shutdown_logging()
    logged = home.choird_log.read_text()
    assert "session ended" in logged
    assert CANARY not in logged
    assert ROTATED not in logged
    assert logged.count(f"tool said {REDACTED}") == 2


async def end_session_saying(daemon: Any, reason: str) -> None:
    """A session whose agent ends it with `reason` (choird logs it): TERMINATE_SELF."""
    started = await daemon.services.sessions.start("agent-1", {})
    control = await agent_control_plane(daemon, "uds", started.session_id, started.lease_token)
    try:
        await control.terminate_self(TerminateSelfRequest(reason=reason))
    finally:
        await control.close()


# -- the encodings -----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    secret=st.text(st.characters(codec="utf-8"), min_size=8, max_size=40),
    before=st.binary(max_size=7),
    after=st.binary(max_size=7),
    urlsafe=st.booleans(),
)
def test_a_secret_inside_any_base64_text_is_found(
    secret: str, before: bytes, after: bytes, urlsafe: bool
) -> None:
    replace_secrets([secret])
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(before + secret.encode() + after).decode()
    assert REDACTED in redact(text)
    assert mentions_secret(json.dumps({"text": text}).encode())
    replace_secrets([])


def test_short_secrets_are_matched_only_as_they_are() -> None:
    replace_secrets(["abcd1234"[:6]])
    assert redact("x abcd12 y") == f"x {REDACTED} y"
    assert redact(base64.b64encode(b"abcd12").decode()) == base64.b64encode(b"abcd12").decode()
