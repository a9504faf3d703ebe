"""`inbox.list` and `session.recover` over a session with a long log: how long the recovery inbox
takes to list its calls of unknown outcome (the console's Inbox tab asks again on every
refresh), and a decision on one takes.

choird runs in this process (embedded Postgres, a temporary home). agent-1's session gets
`EVENTS` committed events — turns of a user message, a model output calling a tool, its intent,
its result (a few KB of output, as a build log or a file read gives) and a reply, on the edge
and a core job's lane — ending in two intents without a result, and a snapshot every 1000
events as the agent sends them (reduced to what the inbox reads: `open_intents`); then it is
marked crashed. Each round is one `inbox.list` through the operator socket, as `choirctl inbox
list` sends it: `inbox_list_ms` with the snapshots, `no_snapshot_ms` once they are deleted (a
session that never took one, the worst case).

Before the crash, while the session is active with the core job's call held, `recover_ms` is
one `session.recover` decision on it (`choirctl session recover <session> --job builder
--choice abort`, what `inbox resolve` runs for a held job; with no agent connected the push
waits in choird's hub); `recover_no_snapshot_ms` is one `session.recover` listing of the
crashed session without its snapshots (the same read as a decision's).

    python -m bench.inbox [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import median, parse_args, report

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.protocol.operator.requests import RecoverChoice
    from choir.store.events import EventRecord

EVENTS = 50_000
SNAPSHOT_EVERY = 1_000
"""config.json's default `snapshot_every_events`."""
FIGURES = ("inbox_list_ms", "no_snapshot_ms", "recover_ms", "recover_no_snapshot_ms")
"""The keys of `--json`, in the order printed."""
OUTPUT = "compiling module {n}: ok\n" * 120
"""A tool result's output, ~3 KB: stored out of line (TOAST) like real ones of that size."""


def session_events(count: int) -> list[EventRecord]:
    """`count` events of turns whose calls all have results, then two open intents."""
    from choir.store.events import EventRecord

    start = datetime(2026, 11, 1, tzinfo=UTC)
    payloads: list[tuple[str, str, dict[str, Any]]] = []
    turn = 0
    while len(payloads) < count - 4:
        lane = "edge" if turn % 3 else "core:builder"
        call = f"call-{turn}"
        payloads += [
            (lane, "user_message", {"text": f"build module {turn}, please"}),
            *proposed(lane, call, {"command": f"make {turn}"}, idempotent=turn % 2 == 0),
            (
                lane,
                "tool_result_committed",
                {
                    "call_id": call,
                    "tool": "choir.exec",
                    "result": {"ok": True, "output": OUTPUT.format(n=turn)},
                },
            ),
            (lane, "model_output", {"lane": lane, "text": f"module {turn} built", "model": "demo"}),
        ]
        turn += 1
    for lane, call in (("edge", "open-edge"), ("core:builder", "open-core")):
        payloads += proposed(lane, call, {"command": f"deploy {call}"}, idempotent=False)
    events, previous = [], "0" * 64
    for rev, (lane, kind, payload) in enumerate(payloads, start=1):
        digest = hashlib.sha256(f"{previous}{rev}{kind}".encode()).hexdigest()
        at = start + timedelta(seconds=rev)
        events.append(EventRecord(rev, kind, lane, payload, previous, digest, at))
        previous = digest
    return events


def proposed(
    lane: str, call: str, arguments: dict[str, Any], *, idempotent: bool
) -> list[tuple[str, str, dict[str, Any]]]:
    """A model output proposing `call` (choir.exec), and its committed intent."""
    output = {
        "lane": lane,
        "text": "",
        "tool_calls": [{"id": call, "name": "choir.exec", "arguments": arguments}],
        "model": "demo",
    }
    intent = {
        "call_id": call,
        "tool": "choir.exec",
        "locks": [],
        "side_effect": "exec",
        "idempotent": idempotent,
    }
    return [(lane, "model_output", output), (lane, "tool_call_committed", intent)]


Samples = dict[str, list[float]]
"""Seconds per round, by figure."""


async def rounds(count: int, events: int) -> tuple[Samples, int]:
    from choir.logs import setup_logging, shutdown_logging

    with tempfile.TemporaryDirectory(prefix="bi-", dir="/tmp") as tmp:
        from choir.config import init_home
        from choir.home import ChoirHome

        home = ChoirHome(Path(tmp) / "h")
        init_home(home)
        quiet_agent(home)
        setup_logging(home, "choird")
        try:
            return await _rounds(home, count, events)
        finally:
            shutdown_logging()


def quiet_agent(home: Any) -> None:
    """No agent heartbeats the session, and storing its log takes seconds: without a long
    crash threshold choird marks it crashed before (or while) the decisions are timed."""
    config = json.loads(home.config_file.read_text())
    config["crash_detection_threshold_ms"] = 3_600_000
    home.config_file.write_text(json.dumps(config, indent=2) + "\n")


async def _rounds(home: Any, count: int, events: int) -> tuple[Samples, int]:
    from choir.client import ChoirClient
    from choir.daemon.app import ChoirDaemon, DaemonOptions
    from choir.daemon.operator.api import operator_handler
    from choir.store.events import insert_events
    from choir.store.snapshots import save_snapshot

    async with (
        ChoirDaemon(DaemonOptions(home), operator=operator_handler) as daemon,
        await ChoirClient.connect(home) as operator,
    ):
        services, database = daemon.services, daemon.database
        assert services is not None
        assert database is not None
        started = await services.sessions.start("agent-1", {})
        log = session_events(events)
        async with database.pool.acquire() as conn:
            for at in range(0, len(log), SNAPSHOT_EVERY):
                batch = log[at : at + SNAPSHOT_EVERY]
                await insert_events(conn, started.session_id, batch)
                await save_snapshot(
                    conn, started.session_id, batch[-1].rev, snapshot_at(log, batch[-1].rev)
                )
            await conn.execute("ANALYZE choir_control.session_events")
        samples = {"recover_ms": await _recovered(operator, started.session_id, count, "abort")}
        await services.sessions.mark_crashed(started.session_id, "killed by the benchmark")
        samples["inbox_list_ms"] = await _listed(operator, count)
        async with database.pool.acquire() as conn:
            await conn.execute("DELETE FROM choir_control.session_snapshots")
        samples["no_snapshot_ms"] = await _listed(operator, count)
        samples["recover_no_snapshot_ms"] = await _recovered(
            operator, started.session_id, count, None
        )
        return samples, len(log)


async def _listed(operator: ChoirClient, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        begun = time.perf_counter()
        listed = await operator.inbox_list()
        samples.append(time.perf_counter() - begun)
        [item] = listed.items
        assert len(item.context) == 2, item.context  # the two open intents, nothing else
    return samples


async def _recovered(
    operator: ChoirClient, session_id: str, count: int, choice: RecoverChoice | None
) -> list[float]:
    """`count` rounds of `session.recover` on the core job's held call."""
    samples = []
    for _ in range(count):
        begun = time.perf_counter()
        recovery = await operator.session_recover(session_id, job_name="builder", choice=choice)
        samples.append(time.perf_counter() - begun)
        held = [call.call_id for call in recovery.interrupted if call.job_name == "builder"]
        assert held == ["open-core"], recovery.interrupted
    return samples


def snapshot_at(log: list[EventRecord], rev: int) -> dict[str, Any]:
    """The part of a snapshot at `rev` the inbox reads: the intents open there, as the
    agent's ledger folds them."""
    intents: dict[str, dict[str, Any]] = {}
    for event in log[:rev]:
        if event.event_type == "tool_call_committed":
            payload = event.payload
            intents[payload["call_id"]] = {
                "rev": event.rev,
                "lane": event.lane,
                "call_id": payload["call_id"],
                "tool": payload["tool"],
                "idempotent": payload["idempotent"],
            }
        elif event.event_type == "tool_result_committed":
            intents.pop(event.payload["call_id"], None)
    return {"rev": rev, "open_intents": list(intents.values())}


def main() -> None:
    args = parse_args(__doc__ or "")
    samples, events = asyncio.run(rounds(3 if args.quick else 7, EVENTS))
    report(
        f"inbox.list and session.recover, a session of {events} events",
        {key: median(samples[key]) * 1000 for key in FIGURES},
        {},  # no goal in the spec: both read the whole log before, 0.85 s here (see CHANGELOG)
        args.json,
    )


if __name__ == "__main__":
    main()
