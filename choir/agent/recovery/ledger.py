"""What only the log's past can tell recovery, folded commit by commit (§13.2, §13.4).

Recovery needs a handful of facts that older events establish: the intents without a result,
the calls of each lane's last model output still unanswered, the open approvals, edge's
unanswered user message, the core jobs still open and the budgets the events account for. The
`Ledger` keeps exactly these, updated from every commit with a dict lookup or two (it runs on the
commit path), so a snapshot can carry them and a resume can start from a snapshot instead of
rev 1: `Ledger.of(snapshot)` and then `observe` the tail gives what folding the whole log gives.

Budgets here are what the *events* account for — a tool call counts once its intent is
committed, a step once its model output is — so snapshot + tail and a full replay agree exactly.
A core job's wall time is measured in commit time, from its `CoreStarted` to the latest commit:
time the agent was down does not count against the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from choir.core.budgets import BudgetCounters, JobCounters
from choir.protocol import (
    EDGE_LANE,
    META_PREFIX,
    CoreJobStart,
    ToolCall,
    core_lane,
    format_ts,
    job_name_of,
)
from choir.protocol.log.snapshot import BudgetUsage, JobUsage, OpenIntent, Snapshot

REPLY_CATEGORIES: Final = frozenset({"reply", "error"})
"""`AgentReplied` categories that answer edge's user message."""


class Entry(Protocol):
    """What the ledger reads of a committed revision (`LogEntry` fits)."""

    @property
    def rev(self) -> int: ...
    @property
    def lane(self) -> str: ...
    @property
    def ts(self) -> str: ...
    @property
    def event(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Intent:
    """A committed intent without a result: after a crash, its outcome is unknown."""

    rev: int
    lane: str
    call_id: str
    tool: str
    idempotent: bool


@dataclass(slots=True)
class OpenJobEntry:
    """A core job with a `CoreStarted` and no `CoreStopped`, and what it used."""

    start: dict[str, Any]
    """Its `CoreJobStart`, in JSON form."""
    started_rev: int
    started_at: datetime
    steps: int = 0
    tool_calls: int = 0
    injections: int = 0

    @property
    def briefing(self) -> CoreJobStart:
        return CoreJobStart.model_validate(self.start)


@dataclass(slots=True)
class Ledger:
    """The recovery facts of one session, as of the last revision it observed."""

    intents: dict[str, Intent] = field(default_factory=dict)
    """Open intents by call id, oldest first."""
    unanswered: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Per lane, the calls (JSON form) of its last model output without a result, by id."""
    approvals: dict[str, str] = field(default_factory=dict)
    """Approval id -> the lane whose proposal waits for it."""
    awaiting_reply: str | None = None
    """Edge's latest user message id while it has no reply."""
    jobs: dict[str, OpenJobEntry] = field(default_factory=dict)
    """Open core jobs by name."""
    core_jobs: int = 0
    tool_calls: int = 0
    tokens: int = 0
    last_ts: str | None = None
    """Commit time of the last revision observed (parsed only when a job's wall time is)."""

    @classmethod
    def of(cls, snapshot: Snapshot | None) -> Ledger:
        """The ledger a snapshot recorded (an empty one without)."""
        if snapshot is None:
            return cls()
        usage = snapshot.budgets
        jobs = {
            job.job_name: OpenJobEntry(
                job.start.model_dump(mode="json"),
                job.started_rev,
                usage.jobs[job.job_name].started_at,
                usage.jobs[job.job_name].steps,
                usage.jobs[job.job_name].tool_calls,
                usage.jobs[job.job_name].injections,
            )
            for job in snapshot.open_jobs
            if job.start is not None and job.started_rev is not None and job.job_name in usage.jobs
        }
        return cls(
            intents={
                i.call_id: Intent(i.rev, i.lane, i.call_id, i.tool, i.idempotent)
                for i in snapshot.open_intents
            },
            unanswered={
                lane: {call.id: call.model_dump(mode="json") for call in calls}
                for lane, calls in snapshot.unanswered_calls.items()
            },
            approvals=dict(snapshot.open_approvals),
            awaiting_reply=snapshot.awaiting_reply,
            jobs=jobs,
            core_jobs=usage.core_jobs,
            tool_calls=usage.tool_calls,
            tokens=usage.tokens,
            last_ts=format_ts(snapshot.ts) if snapshot.ts is not None else None,
        )

    # -- folding ---------------------------------------------------------------------------------

    def observe(self, entry: Entry) -> None:
        """Fold one committed revision (any lane's)."""
        handler = _HANDLERS.get(str(entry.event["kind"]))
        if handler is not None:
            handler(self, entry)
        self.last_ts = entry.ts

    def observe_all(self, entries: Iterable[Entry]) -> Ledger:
        for entry in entries:
            self.observe(entry)
        return self

    def _model_output(self, entry: Entry) -> None:
        event = entry.event
        self.tokens += int(event.get("usage", {}).get("total_tokens", 0))
        self.unanswered[entry.lane] = {str(call["id"]): call for call in event["tool_calls"]}
        job = self._job_of(entry.lane)
        if job is not None:
            job.steps += 1

    def _intent(self, entry: Entry) -> None:
        event = entry.event
        call_id = str(event["call_id"])
        tool, idempotent = str(event["tool"]), bool(event["idempotent"])
        self.intents[call_id] = Intent(entry.rev, entry.lane, call_id, tool, idempotent)
        self.tool_calls += 1
        job = self._job_of(entry.lane)
        if job is not None:
            job.tool_calls += 1

    def _result(self, entry: Entry) -> None:
        event = entry.event
        call_id = str(event["call_id"])
        self.intents.pop(call_id, None)
        calls = self.unanswered.get(entry.lane)
        if calls is not None:
            calls.pop(call_id, None)
        data = event["result"].get("data") or {}
        if str(event["tool"]).startswith(META_PREFIX) and "approval_id" in data:
            self.approvals[str(data["approval_id"])] = entry.lane

    def _approval(self, entry: Entry) -> None:
        self.approvals.pop(str(entry.event["approval_id"]), None)

    def _core_started(self, entry: Entry) -> None:
        job = entry.event["job"]
        self.core_jobs += 1
        self.jobs[str(job["job_name"])] = OpenJobEntry(job, entry.rev, _parse_ts(entry.ts))

    def _core_stopped(self, entry: Entry) -> None:
        name = str(entry.event["job_name"])
        self.jobs.pop(name, None)
        self.unanswered.pop(core_lane(name), None)

    def _injected(self, entry: Entry) -> None:
        event = entry.event
        job = self._job_of(str(event["target"])) if event.get("source") == "edge" else None
        if job is not None:
            job.injections += 1

    def _user_msg(self, entry: Entry) -> None:
        self.awaiting_reply = str(entry.event.get("message_id") or "") or None

    def _replied(self, entry: Entry) -> None:
        if entry.event.get("category") in REPLY_CATEGORIES:
            self.awaiting_reply = None

    def _job_of(self, lane: str) -> OpenJobEntry | None:
        name = job_name_of(lane)
        return self.jobs.get(name) if name is not None else None

    # -- reading ---------------------------------------------------------------------------------

    def unanswered_calls(self, lane: str) -> list[ToolCall]:
        """The calls of `lane`'s last model output that have no committed result."""
        return [ToolCall.model_validate(call) for call in self.unanswered.get(lane, {}).values()]

    def intents_of(self, lane: str) -> list[Intent]:
        return [intent for intent in self.intents.values() if intent.lane == lane]

    def edge_intents(self) -> dict[str, Intent]:
        return {i.call_id: i for i in self.intents.values() if i.lane == EDGE_LANE}

    def usage(self) -> BudgetUsage:
        """The budget counters, in snapshot form."""
        jobs = {
            name: JobUsage(
                started_at=job.started_at,
                steps=job.steps,
                tool_calls=job.tool_calls,
                injections=job.injections,
                time_budget_ms=_time_budget(job.start),
            )
            for name, job in self.jobs.items()
        }
        return BudgetUsage(
            core_jobs=self.core_jobs, tool_calls=self.tool_calls, tokens=self.tokens, jobs=jobs
        )

    def open_intents(self) -> list[OpenIntent]:
        return [
            OpenIntent(
                rev=i.rev, lane=i.lane, call_id=i.call_id, tool=i.tool, idempotent=i.idempotent
            )
            for i in self.intents.values()
        ]

    def counters(self, now: float) -> BudgetCounters:
        """The arbiter's counters at monotonic time `now`: each job has run, in commit time,
        from its `CoreStarted` to the latest commit."""
        jobs = {
            name: JobCounters(
                started_at=now - self._run_s(job),
                steps=job.steps,
                tool_calls=job.tool_calls,
                injections=job.injections,
                time_budget_ms=_time_budget(job.start),
            )
            for name, job in self.jobs.items()
        }
        return BudgetCounters(self.core_jobs, self.tool_calls, self.tokens, jobs)

    def _run_s(self, job: OpenJobEntry) -> float:
        if self.last_ts is None:
            return 0.0
        return max((_parse_ts(self.last_ts) - job.started_at).total_seconds(), 0.0)


def _time_budget(start: dict[str, Any]) -> int | None:
    budget = (start.get("tool_constraints") or {}).get("time_budget_ms")
    return int(budget) if budget else None


def _parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


_HANDLERS: Final[dict[str, Callable[[Ledger, Entry], None]]] = {
    "model_output": Ledger._model_output,
    "tool_call_committed": Ledger._intent,
    "tool_result_committed": Ledger._result,
    "approval_resolved": Ledger._approval,
    "core_started": Ledger._core_started,
    "core_stopped": Ledger._core_stopped,
    "injected_instruction": Ledger._injected,
    "user_msg": Ledger._user_msg,
    "agent_replied": Ledger._replied,
}


__all__ = ["Intent", "Ledger", "OpenJobEntry"]
