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


def gateways(*states: tuple[str, str]) -> str:
    views = [{"name": name, "type": "telegram", "state": state} for name, state in states]
    return header(gateways=views)


def test_the_gateways_item_names_the_worst_gateway_that_is_not_up() -> None:
    assert "gateways none" in header(gateways=[])
    assert "gateways 2/2 up  │" in gateways(("a", "running"), ("b", "running"))
    # the one the operator must act on first, whatever the order, and how many more
    worst = gateways(("a", "backing_off"), ("b", "invalid_token"), ("c", "running"))
    assert "gateways 1/3 up · b token rejected +1  │" in worst
    assert "gateways 0/1 up · a no token" in gateways(("a", "no_token"))
    assert "gateways 1/2 up · n restart pending" in gateways(
        ("a", "running"), ("n", "pending_restart")
    )
    assert "gateways 0/1 up · a backing off" in gateways(("a", "backing_off"))
