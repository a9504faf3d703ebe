"""Failpoints: named places where a test can make a process panic, stall or die on purpose.

Crash recovery (§13) is only believable when it is exercised at the exact instants that matter —
after an intent is committed but before choird acknowledged it, after a heartbeat was sent but
before its ack was applied. The environment arms them for one process:

    CHOIR_FAILPOINTS="heartbeat.after_send_before_ack=exit;tool.after_intent_before_run=sleep(500)"

choird's runtimes (process and docker) pass its own `CHOIR_FAILPOINTS` on to the agents they
start (and to nothing else: `passed_on`), which is how `tests/faults` crash or hold an agent
choird manages.

Actions: `panic` raises `FailpointPanic`; `sleep(ms)` pauses (the event loop keeps running under
`await failpoint(...)`; `failpoint_sync` blocks the thread); `exit` ends the process at once with
code 137, as if SIGKILL-ed: no `finally`, no flush, no atexit. With the variable unset every point
returns at once — the spec is parsed once, and an unarmed point costs one dict lookup. Names are
checked against `KNOWN_FAILPOINTS`, so a typo fails at start-up instead of silently arming
nothing; add a point's name there when placing it.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from choir.errors import UsageError

ENV_VAR: Final = "CHOIR_FAILPOINTS"
EXIT_CODE: Final = 137
"""What a SIGKILL-ed process reports (128 + 9), so supervisors treat both alike."""

KNOWN_FAILPOINTS: Final = frozenset(
    {
        "arbiter.after_append_before_ack",
        "tool.after_intent_before_run",
        "tool.after_run_before_result",
        "heartbeat.before_send",
        "heartbeat.after_send_before_ack",
        "fs.read.in_thread",
        "fs.write.in_thread",
        "fs.write.before_rename",
        "inbox.after_accept_before_push",
        "postgres.before_restart",
        "choird.before_stop_agents",
        "memory.close.after_chunks",
        "edge.after_recall",
        "agent.after_hello",
        "hello.before_answer",
        "memory.archive.before_store",
        "memory.rollup.before_store",
        "memory.forget.before_delete",
        "memory.forget.after_delete",
        "memory.key.after_record",
        "memory.restore.after_write",
        "memory.seal.after_items",
        "memory.reembed.after_page",
        "memory.backfill_tools.after_session",
        "proposal.after_commit",
        "proposal.after_merge",
        "proposal.after_build",
        "proposal.after_update",
        "proposal.merge.before_push",
        "proposal.merge.after_push",
        "proposal.config_after_write",
        "telegram.card.before_store",
        "telegram.card.after_send",
        "telegram.card.before_drop",
        "choird.start.after_adoption",
        "choird.start.after_gateways",
    }
)
"""Every placed failpoint. `arbiter.after_append_before_ack`: a non-idempotent intent is in the
local log, not yet durable. `tool.after_intent_before_run`: the intent is durable, the tool has
not run. `tool.after_run_before_result`: the tool ran, its result is not committed yet.
`heartbeat.before_send` / `heartbeat.after_send_before_ack`: around one HEARTBEAT.
`fs.read.in_thread` / `fs.write.in_thread`: inside a file tool's thread (before it counts lines;
before its point of no return) — `sleep` there is work that cannot be interrupted; armed, it
sends even a small read or write to a thread.
`fs.write.before_rename`: past that point, before the rename that makes the write visible (armed,
every write takes a thread too).
`inbox.after_accept_before_push` (choird): a user message is durable and acknowledged, not yet
pushed to its agent.
`postgres.before_restart` (choird): its supervisor is about to restart the embedded server.
`choird.before_stop_agents` (choird): it is stopping and about to stop its agents.
`memory.close.after_chunks` (choird): a session's memory chunks are stored, its close is not
recorded yet.
`agent.after_hello` (agent): INIT_HELLO is answered ("session started" logged), the rest of
the handover and the config are not fetched yet — the agent is starting, not serving.
`hello.before_answer` (choird): an agent's INIT_HELLO is handled (its handover read, its pending
messages pushed again), the answer not sent — with `exit`, the agent's hello is lost in flight.
`edge.after_recall` (agent): a message's recalled memories are committed, its first LLM call
is not made yet.
`memory.archive.before_store` (choird): a compaction naming an archive is durable, its archive
is not stored yet (the session's close stores it).
`memory.rollup.before_store` (choird): a `memory_rollup` event is durable, its roll-up is not
stored yet (the session's close stores it).
`memory.key.after_record` (choird): a keyed `agent start` recorded its encrypted memories' key
checks inside their transaction, not committed, the agent not started.
`memory.restore.after_write` (choird): a knowledge restore wrote the version (sealed, in an
encrypted memory) inside its transaction, not committed.
`memory.seal.after_items` (choird): a keyed `agent start` sealed the current text and data of
the items written in the clear before their memory was marked encrypted, inside its
transaction; their versions and vectors not yet, nothing committed.
`memory.reembed.after_page` (choird): a page of a re-embed's vectors is stored, more may wait.
`memory.backfill_tools.after_session` (choird): one session's tool-call rows are stored by
`memory backfill-tools`, more sessions may wait.
`proposal.after_<step>` (choird): an approved proposal's apply finished that step (commit,
merge, build, update) and recorded it; the next has not begun.
`proposal.merge.before_push` / `proposal.merge.after_push` (choird): an apply's merge is
computed, the configured ref not moved yet / moved (a remote repo's: pushed), the step not
recorded done.
`proposal.config_after_write` (choird): an approved config change is written to config.json,
not yet loaded nor applied.
`telegram.card.before_store` (choird): a core job's `core_started` is durable, its card is
neither stored nor sent yet.
`telegram.card.after_send` (choird): Telegram took a core-job card's message, its id is not
stored yet.
`telegram.card.before_drop` (choird): a core-job card's final edit is made (or given up), its
row is not deleted yet.
`choird.start.after_adoption` (choird): starting, adopted agents have their sockets back, the
operator API and the gateways are not started yet (`sleep` there: adopted agents replicate
what they did while choird was away before the console or any bot listens).
`choird.start.after_gateways` (choird): starting, the operator API listens and the gateways
started; the timers, the memory tools and the browser are not started, "choird ready" not said
(`sleep` there: an operator acts on adopted agents before choird is ready)."""

_ENTRY = re.compile(r"^(?P<name>[a-z0-9_]+(?:\.[a-z0-9_]+)+)=(?P<action>.+)$")
_SLEEP = re.compile(r"^sleep\((?P<ms>\d+)\)$")


class FailpointPanic(BaseException):
    """An armed `panic` failpoint fired.

    A BaseException, like a Go panic: the `except Exception` guards that keep a lane or the
    arbiter alive on ordinary errors must not absorb a simulated crash.
    """


@dataclass(frozen=True, slots=True)
class Action:
    """What an armed failpoint does."""

    kind: Literal["panic", "sleep", "exit"]
    ms: int = 0
    """Pause length for `sleep`."""


def parse_failpoints(spec: str) -> Mapping[str, Action]:
    """`name=action;…` as a name -> action map; UsageError naming the first bad entry."""
    armed: dict[str, Action] = {}
    for raw in spec.split(";"):
        entry = raw.strip()
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if match is None:
            raise _bad(entry, "expected name=action, e.g. heartbeat.before_send=panic")
        name = match["name"]
        if name not in KNOWN_FAILPOINTS:
            raise _bad(
                entry, f"unknown failpoint {name!r} (known: {', '.join(sorted(KNOWN_FAILPOINTS))})"
            )
        armed[name] = _action(entry, match["action"].strip())
    return MappingProxyType(armed)


def _action(entry: str, text: str) -> Action:
    if text == "panic":
        return Action("panic")
    if text == "exit":
        return Action("exit")
    sleep = _SLEEP.match(text)
    if sleep is not None:
        return Action("sleep", int(sleep["ms"]))
    raise _bad(entry, f"unknown action {text!r}; use panic, exit or sleep(<ms>)")


def _bad(entry: str, why: str) -> UsageError:
    return UsageError(f"{ENV_VAR}: bad entry {entry!r}: {why}")


_armed: Mapping[str, Action] | None = None


def arm_from_env(environ: Mapping[str, str] | None = None) -> Mapping[str, Action]:
    """Parse `CHOIR_FAILPOINTS` now (call at start-up so a bad spec fails there); returns it."""
    global _armed
    source = os.environ if environ is None else environ
    _armed = parse_failpoints(source.get(ENV_VAR, ""))
    return _armed


def passed_on(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`CHOIR_FAILPOINTS` as this process has it, for the environment of an agent it starts
    ({} when unset). It holds no secret, only names of places in choir's code."""
    spec = (os.environ if environ is None else environ).get(ENV_VAR)
    return {ENV_VAR: spec} if spec else {}


def armed() -> Mapping[str, Action]:
    """The armed failpoints, parsed from the environment on first use."""
    return _armed if _armed is not None else arm_from_env()


async def failpoint(name: str) -> None:
    """Fire `name` if armed; returns at once otherwise."""
    action = armed().get(name)
    if action is None:
        return
    if action.kind == "sleep":
        await asyncio.sleep(action.ms / 1000)
        return
    _fire(name, action)


def failpoint_sync(name: str) -> None:
    """`failpoint` for synchronous code; `sleep` blocks the calling thread."""
    action = armed().get(name)
    if action is None:
        return
    if action.kind == "sleep":
        time.sleep(action.ms / 1000)
        return
    _fire(name, action)


def _fire(name: str, action: Action) -> None:
    if action.kind == "exit":
        os.write(2, f"failpoint {name}: exit {EXIT_CODE}\n".encode())
        os._exit(EXIT_CODE)
    raise FailpointPanic(f"failpoint {name}: panic")


__all__ = [
    "ENV_VAR",
    "EXIT_CODE",
    "KNOWN_FAILPOINTS",
    "Action",
    "FailpointPanic",
    "arm_from_env",
    "armed",
    "failpoint",
    "failpoint_sync",
    "parse_failpoints",
    "passed_on",
]
