"""Session logs full of tool calls, and what folding them says is still open.

`call_log` writes a seeded, random log of the shapes a real one has and a few it rarely has:
lanes interleaved, calls answered late or never, idempotent calls, a call id reused after its
result, a result stored before its intent, an intent no model output proposed, a model output
proposing one id twice, arguments missing or null, an intent without a side effect, results
of a few KB. `folded` is the recovery inbox's reading before `choir.store.open_intents` (the
whole log folded in rev order), and `interrupted` is `session.recover`'s, both kept here as the
reference; `ledger_snapshot` is what the agent's own ledger puts in a snapshot.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from choir.agent.recovery.ledger import Ledger
from choir.protocol.log.lanes import job_name_of
from choir.protocol.operator.answers import InterruptedCall
from choir.store.events import EventRecord

LANES = ("edge", "core:build", "core:deploy")
SIDE_EFFECTS = {"choir.exec": "external", "choir.fs.write": "write"}
"""By tool; choir.git.push's intents carry none (as a log written before the field might)."""
START = datetime(2026, 11, 1, tzinfo=UTC)


def call_log(seed: int, count: int) -> list[EventRecord]:
    """About `count` events (a turn is not cut short), random but the same for a seed."""
    rng = random.Random(seed)
    payloads: list[tuple[str, str, dict[str, Any]]] = []
    proposed: dict[str, list[str]] = {lane: [] for lane in LANES}
    committed: list[str] = []  # intents without a result yet, any lane
    answered: list[str] = []
    serial = 0
    while len(payloads) < count:
        lane = rng.choice(LANES)
        roll = rng.random()
        if roll < 0.25:
            calls = []
            for _ in range(rng.randint(1, 3)):
                serial += 1
                reused = answered and rng.random() < 0.05
                call_id = rng.choice(answered) if reused else f"call-{serial}"
                call: dict[str, Any] = {"id": call_id, "name": "choir.exec"}
                shape = rng.random()
                if shape < 0.8:
                    call["arguments"] = {"command": f"step {serial}", "n": serial}
                elif shape < 0.9:
                    call["arguments"] = None
                calls.append(call)
                if rng.random() < 0.05:  # the same id twice in one output: the last one counts
                    calls.append({**call, "arguments": {"command": f"again {serial}"}})
            proposed[lane].extend(dict.fromkeys(c["id"] for c in calls))
            output = {"lane": lane, "text": "", "tool_calls": calls, "model": "demo"}
            payloads.append((lane, "model_output", output))
        elif roll < 0.5 and (proposed[lane] or rng.random() < 0.05):
            if proposed[lane]:
                call_id = proposed[lane].pop(0)
            else:  # an intent no model output proposed: its arguments are unknown
                serial += 1
                call_id = f"unproposed-{serial}"
            if call_id in committed:
                continue  # an id is committed once until answered, as the agent does
            tool = rng.choice(("choir.exec", "choir.fs.write", "choir.git.push"))
            intent: dict[str, Any] = {
                "call_id": call_id,
                "tool": tool,
                "locks": [],
                **({"side_effect": SIDE_EFFECTS[tool]} if tool in SIDE_EFFECTS else {}),
                "idempotent": rng.random() < 0.3,
            }
            committed.append(call_id)
            payloads.append((lane, "tool_call_committed", intent))
        elif roll < 0.75 and committed and rng.random() < 0.9:
            # most calls are answered, some after others committed later
            call_id = committed.pop(rng.randrange(len(committed)) if rng.random() < 0.3 else 0)
            answered.append(call_id)
            text = "line of output\n" * rng.choice((2, 200))
            answer = {"call_id": call_id, "tool": "choir.exec", "result": {"output": text}}
            payloads.append((lane, "tool_result_committed", answer))
        elif roll < 0.77:  # a result for an id whose intent comes later, or never
            serial += 1
            call_id = f"early-{serial}"
            result = {"call_id": call_id, "tool": "choir.exec", "result": {"output": "?"}}
            payloads.append((lane, "tool_result_committed", result))
            proposed[lane].append(call_id)
        else:
            payloads.append((lane, "user_message", {"text": f"message {len(payloads)}"}))
    return records(payloads)


def records(payloads: list[tuple[str, str, dict[str, Any]]]) -> list[EventRecord]:
    """Events of `payloads` from rev 1, chained, a second apart."""
    events, previous = [], "0" * 64
    for rev, (lane, kind, payload) in enumerate(payloads, start=1):
        digest = hashlib.sha256(f"{previous}{rev}{kind}".encode()).hexdigest()
        at = START + timedelta(seconds=rev)
        events.append(EventRecord(rev, kind, lane, payload, previous, digest, at))
        previous = digest
    return events


def folded(events: list[EventRecord]) -> list[tuple[str, str, str, dict[str, Any] | None, str]]:
    """The log's intents without a result, oldest first, each with its model's arguments —
    (lane, call id, tool, arguments, at): the recovery inbox's fold of the whole log."""
    arguments: dict[str, dict[str, Any]] = {}
    intents: dict[str, tuple[str, str, str, dict[str, Any] | None, str]] = {}
    for event in events:
        payload = event.payload
        if event.event_type == "model_output":
            for call in payload.get("tool_calls") or ():
                arguments[str(call.get("id"))] = dict(call.get("arguments") or {})
        elif event.event_type == "tool_call_committed" and not payload.get("idempotent"):
            call_id = str(payload["call_id"])
            intents[call_id] = (
                event.lane,
                call_id,
                str(payload["tool"]),
                arguments.get(call_id),
                event.created_at.isoformat(),
            )
        elif event.event_type == "tool_result_committed":
            intents.pop(str(payload.get("call_id")), None)
    return list(intents.values())


def interrupted(events: list[EventRecord]) -> list[InterruptedCall]:
    """The log's intents without a result, oldest first, as `session.recover` showed them when
    it folded the whole log."""
    open_intents: dict[str, EventRecord] = {}
    for event in events:
        call_id = str(event.payload.get("call_id"))
        if event.event_type == "tool_call_committed" and not event.payload.get("idempotent"):
            open_intents[call_id] = event
        elif event.event_type == "tool_result_committed":
            open_intents.pop(call_id, None)
    return [
        InterruptedCall(
            rev=event.rev,
            lane=event.lane,
            job_name=job_name_of(event.lane),
            call_id=event.payload["call_id"],
            tool=event.payload["tool"],
            side_effect=event.payload.get("side_effect"),
        )
        for event in open_intents.values()
    ]


@dataclass(frozen=True)
class _Entry:
    """A stored event as the agent's ledger reads a committed revision."""

    rev: int
    lane: str
    ts: str
    event: dict[str, Any]


def ledger_snapshot(events: list[EventRecord], rev: int) -> dict[str, Any]:
    """The intents part of the snapshot the agent would take at `rev`: its own ledger
    (`choir.agent.recovery.ledger`) folded over the events up to it."""
    ledger = Ledger().observe_all(
        _Entry(e.rev, e.lane, e.created_at.isoformat(), {**e.payload, "kind": e.event_type})
        for e in events[:rev]
    )
    intents = [intent.model_dump(mode="json") for intent in ledger.open_intents()]
    return {"rev": rev, "open_intents": intents}
