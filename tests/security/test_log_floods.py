"""A flood of refused agent calls costs choird's log a few lines, not one per call.

Before the fix choird logged every call refused for an invalid lease (`choird.agent_socket`),
every lease used on another agent's socket, every refused or failed verb (`choird.rpc`) and
every handler failure (`choir.transport`, with a traceback): an agent a prompt injection steers
could fill the log and the disk as fast as its socket took calls. Now each such line is
throttled per peer (`choir.logs.throttle`): a burst of lines, then one count per window.

The pure throttle is checked on a table; then a real choird (in this process, logging to
`$CHOIR_HOME/logs/choird.log` as `choird` does) takes bounded floods — 1,500 calls each — of a
forged lease on an agent's own socket, a forged lease over HTTPS, and agent-1's real lease on
agent-2's socket. The log grows by a bounded amount, every refused call is either a line or
part of a count, and the counts are logged once the flood is over.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.logs import get_logger, setup_logging, shutdown_logging
from choir.logs.throttle import BURST, WINDOW_S, Throttle, ThrottledLog
from choir.store.postgres.target import ConnectParams
from choir.transport import RpcError, connect
from tests.harness.daemons import certificate, poll_until, running_daemon
from tests.harness.homes import external_postgres, make_home, short_root

FLOOD = 1_500
"""Calls in each flood: bounded, and far more than the lines they may cost."""
MESSAGES = ("refused a call with an invalid lease", "refused another agent's lease")

# -- the throttle, pure ------------------------------------------------------------------------


def test_a_throttle_logs_a_burst_then_counts_and_backs_off() -> None:
    throttle = Throttle(burst=3, window_s=10.0, max_window_s=40.0)
    decisions = [throttle.note(0.5 + i / 100) for i in range(10)]
    assert decisions == [(True, 0)] * 3 + [(False, 0)] * 7
    assert throttle.expire(9.0) == 0  # the window is not over
    assert throttle.expire(10.5) == 7  # over: its count, and a window twice as long
    assert (throttle.window, throttle.ended_window, throttle.left) == (20.0, 10.0, 0)
    assert throttle.note(11.0) == (False, 0)  # still flooding: counted, not logged
    assert throttle.note(31.0) == (False, 1)  # that window ended with 1; the next doubles
    assert throttle.window == 40.0
    assert throttle.expire(71.0) == 1
    assert throttle.window == 40.0  # the longest window
    assert throttle.note(200.0) == (True, 0)  # a quiet window ended: a fresh burst
    assert throttle.window == 10.0


def test_a_throttled_log_says_how_many_lines_it_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    throttled = ThrottledLog(
        get_logger("test.throttle"), "refused", burst=2, window_s=5.0, clock=lambda: now[0]
    )
    with caplog.at_level(logging.WARNING, logger="test.throttle"):
        for i in range(50):
            throttled.emit("peer-a", {"n": i})
        throttled.emit("peer-b", {"n": 0})
        now[0] = 6.0
        throttled.emit("peer-a", {"n": 50})  # no loop to time it: reported with the next line
    lines = [(r.getMessage(), r.__dict__["fields"]) for r in caplog.records]
    assert lines == [
        ("refused", {"n": 0}),
        ("refused", {"n": 1}),
        ("refused", {"n": 0}),
        ("refused", {"n": 49, "suppressed": 48, "window_s": 5.0}),
    ]


def test_the_table_of_peers_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    throttled = ThrottledLog(get_logger("test.throttle"), "refused", burst=1, max_keys=4)
    with caplog.at_level(logging.WARNING, logger="test.throttle"):
        for peer in range(1_000):
            throttled.emit(peer, {"peer": peer})
            throttled.emit(peer, {"peer": peer})  # suppressed; counted when its key is dropped
    assert len(throttled._keys) == 4
    counts = [r.__dict__["fields"].get("suppressed") for r in caplog.records]
    assert counts.count(1) == 996
    assert len(caplog.records) == 1_996


# -- a real choird under a flood ---------------------------------------------------------------


@pytest.fixture
def home(pg_params: ConnectParams) -> Iterator[ChoirHome]:
    with short_root("lf-") as root:
        (root / "ws-other").mkdir()
        yield make_home(root, postgres=external_postgres(pg_params))


def lines_of(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def flood(target: str | Path, session_id: str, token: str, **kw: Any) -> None:
    """FLOOD heartbeats as `session_id` with `token`, each refused."""
    async with await connect(target, session_id=session_id, lease_token=token, **kw) as client:
        for _ in range(FLOOD):
            with pytest.raises(RpcError, match=r"lease|another agent"):
                await client.call("HEARTBEAT", {})


@pytest.mark.slow
@pytest.mark.serial  # a flood of connections: alone, so it meets only its own
async def test_a_flood_of_refused_calls_costs_a_bounded_log(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the flood's own HTTP client runs in this process: its per-request lines are not choird's
    monkeypatch.setattr(logging.getLogger("httpx"), "level", logging.WARNING)
    setup_logging(home, "choird")
    try:
        async with running_daemon(home) as daemon, await ChoirClient.connect(home):
            assert daemon.services is not None
            assert daemon.http is not None
            started = await daemon.services.sessions.start("agent-1", {})
            own = await daemon.open_agent_socket("agent-1")
            other = await daemon.open_agent_socket("agent-2")
            before = home.choird_log.stat().st_size
            await asyncio.gather(
                flood(own, "s-forged", "not-a-lease"),
                flood(daemon.http.url, "s-forged", "nope", ca_file=certificate(daemon)),
                flood(other, started.session_id, started.lease_token),
            )
            grown = home.choird_log.stat().st_size - before
            assert grown < 16 * 1024, f"the log grew {grown} bytes during the flood"
            # each window ends (the longest, twice or four times WINDOW_S) and logs its count
            await poll_until(lambda: all_counted(home.choird_log), within=12 * WINDOW_S, every=1)
    finally:
        shutdown_logging()
    by_peer = refusals(home.choird_log)
    assert len(by_peer) == 3, sorted(by_peer)
    for key, lines in by_peer.items():
        full = [line for line in lines if "suppressed" not in line]
        assert len(full) <= BURST, key  # a burst, then only counts
        assert lines[-1].get("suppressed"), key  # the flood's end was reported
    logged = lines_of(home.choird_log)
    assert sum(map(len, by_peer.values())) < 40
    assert len(logged) < 80  # nothing else logged per call either


def refusals(log: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The refusal lines of `log` by message and peer."""
    by_peer: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in lines_of(log):
        if line["message"] in MESSAGES:
            peer = line.get("peer") or line.get("socket_agent")
            by_peer.setdefault((line["message"], str(peer)), []).append(line)
    return by_peer


def all_counted(log: Path) -> bool:
    """Whether every refused call of the three floods is a line of `log` or in a count."""
    by_peer = refusals(log)
    return len(by_peer) == 3 and all(
        sum(line.get("suppressed", 1) for line in lines) == FLOOD for lines in by_peer.values()
    )
