"""The Logs tab against a real choird: its own log and an agent's, followed live."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from choir.home import ChoirHome
from choir.logs import get_logger, setup_logging, shutdown_logging
from tests.tui.actions.conftest import Choird
from tests.tui.pilot import console, show_tab, until
from tui.views.logs import LogsView, human_line

pytestmark = pytest.mark.slow


@pytest.fixture
def choird_logging(home: ChoirHome) -> Iterator[None]:
    """This process (where choird runs) logs to the home's logs/choird.log, as `choird` does."""
    setup_logging(home, "choird")
    try:
        yield
    finally:
        shutdown_logging()


def shown(view: LogsView) -> str:
    return "\n".join(view.log_widget.lines)


async def test_choirds_log_is_tailed_live_and_the_agents_on_switch(
    choird_logging: None, choird: Choird
):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await until(pilot, lambda: app.state.selected_agent == "agent-1", what="the selection")
        await show_tab(pilot, "logs")
        view = app.query_one(LogsView)
        await until(pilot, lambda: view.live, what="the snapshot")
        get_logger("choird.test").info("a line written now", fields={"answer": 42})
        await until(
            pilot, lambda: "a line written now  answer=42" in shown(view), what="the new line"
        )
        assert " INFO    choird.test a line written now" in shown(view)
        await pilot.press("j")
        assert '"message":"a line written now"' in shown(view)
        await pilot.press("s")
        await until(pilot, lambda: view.source == "agent-1" and view.live, what="agent-1's log")
        assert "agent-1 log" in str(view.query_one("#logs-title").render())


def test_records_read_as_one_line_and_other_lines_stay_as_they_are():
    raw = (
        '{"timestamp":"2026-01-02T03:04:05.678Z","level":"WARNING","source":"choird",'
        '"session_id":null,"lane":null,"logger":"choird.x","message":"slow","ms":12}'
    )
    assert human_line(raw) == "03:04:05.678 WARNING choird.x slow  ms=12"
    assert human_line(raw.replace("WARNING", "INFO")) == "03:04:05.678 INFO    choird.x slow  ms=12"
    assert human_line("not json") == "not json"
    assert human_line("[1, 2]") == "[1, 2]"
