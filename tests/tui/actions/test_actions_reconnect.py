"""The Chat and Logs streams survive choird going away and coming back.

The console starts first and outlives two choird lifetimes on the same home (in the test process,
on the test's database). Between them the console shows it is disconnected; afterwards the log
tail follows the file again and the chat shows the new choird's replies, although that choird
numbers them from 1 again.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.logs import get_logger, setup_logging, shutdown_logging
from tests.harness.daemons import running_daemon
from tests.tui.pilot import show_tab, until
from tui.app import ChoirApp
from tui.views.chat import ChatView
from tui.views.logs import LogsView

pytestmark = pytest.mark.slow


@pytest.fixture
def choird_logging(home: ChoirHome) -> Iterator[None]:
    setup_logging(home, "choird")
    try:
        yield
    finally:
        shutdown_logging()


def replies(view: ChatView) -> list[str]:
    return [text for category, text in view.transcripts["agent-1"] if category == "reply"]


def replied(view: ChatView, count: int) -> bool:
    return len(replies(view)) == count


def tailed(view: LogsView, text: str) -> bool:
    return text in "\n".join(view.log_widget.lines)


async def test_chat_and_log_tail_resume_when_choird_returns(choird_logging: None, home: ChoirHome):
    app = ChoirApp(home)
    async with app.run_test(size=(120, 40)) as pilot:
        chat, logs = app.query_one(ChatView), app.query_one(LogsView)
        for life in ("first", "second"):
            async with (
                running_daemon(home),
                await ChoirClient.connect(home, call_timeout=None) as client,
            ):
                await until(pilot, lambda: app.state.connection == "connected", what="connected")
                await client.agent_start("agent-1")
                await show_tab(pilot, "logs")
                get_logger("choird.test").info(f"{life} life")
                line = f"{life} life"
                await until(pilot, partial(tailed, logs, line), what=line)
                await show_tab(pilot, "chat")
                await until(pilot, lambda: chat.agent_id == "agent-1", what="agent-1's chat")
                await pilot.press(*"hello", "enter")
                count = 1 if life == "first" else 2
                await until(pilot, partial(replied, chat, count), what="the reply")
                await client.agent_stop("agent-1")
            await until(
                pilot, lambda: app.state.connection != "connected", what="the disconnection"
            )
    assert replies(chat) == ["Hello from the script.", "Hello from the script."]
