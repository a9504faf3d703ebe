"""The header's health line names choird's database and disk problems (issue 12.4, 12.6)."""

from __future__ import annotations

from tests.tui.sample import status as sample_status
from tui.state import ConsoleState
from tui.widgets.health import health_text


def header(**status: object) -> str:
    state = ConsoleState(connection="connected")
    state.set_status(sample_status(**status))
    return health_text(state).plain


def test_a_full_disk_and_a_restarting_postgres_are_in_the_header() -> None:
    assert "disk" not in header(disk={"state": "ok"})
    assert "disk full" in header(disk={"state": "full", "reason": "no space left"})
    assert "disk io error" in header(disk={"state": "io_error", "reason": "EIO"})
    restarting = {"state": "degraded", "problem": "restarting", "reason": "restarting it"}
    assert "postgres restarting" in header(postgres=restarting)
    assert "postgres degraded" in header(postgres={"state": "degraded", "problem": "down"})
