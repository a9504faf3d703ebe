"""Random interleavings never break §9: exclusion, hierarchy, progress, no leaks.

Two layers:
- A hypothesis state machine drives the pure LockTable with acquire / release / cancel-while-waiting
  / release_all across edge and three cores, and after every step compares it with a naive
  reference model that states each §9 rule pairwise over every held lock (no indexes, no counters).
- Random asyncio schedules drive the real LockManager: lanes hold locksets across awaits, get
  cancelled (while waiting or holding) or revoked; a checker asserts every lockset entering an
  `async with` block is compatible with everything held at that moment, and that the manager
  drains and ends empty.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from choir.agent.kernel.locks import LockManager
from choir.core.locks.lockset import LockRequest, Lockset, LockUsageError, Mode
from choir.core.locks.table import LockTable, Waiter

OWNERS = ("edge", "core:a", "core:b", "core:c")
RESOURCES = (
    "workspace",
    "file:.",
    "file:a",
    "file:a/x",
    "file:a/x/y",
    "file:b",
    "file:ab",
    "choirtmp",
    "browser_tab",
)
"""`file:.` is the root; `file:a` the directory of `file:a/x` and `file:a/x/y`; `file:ab` shares a
name prefix with `file:a` but is no child of it."""

locksets = st.lists(
    st.builds(LockRequest, st.sampled_from(RESOURCES), st.sampled_from(("S", "X"))),
    min_size=1,
    max_size=3,
).map(Lockset)


def covers(directory: str, path: str) -> bool:
    """Whether file key `directory` is `path` or a directory above it (`.` is above all)."""
    top, below = directory.removeprefix("file:"), path.removeprefix("file:")
    return top in (".", below) or below.startswith(top + "/")


def conflicts(owner: str, lock: LockRequest, holder: str, held: LockRequest) -> bool:
    """§9 pairwise: does `held` (held by another owner, `holder`) stop `owner` taking `lock`?"""
    (resource, mode), (held_resource, held_mode) = lock, held
    either_x = "X" in (mode, held_mode)
    if resource == held_resource:
        return either_x
    files = resource.startswith("file:") and held_resource.startswith("file:")
    if files and (covers(resource, held_resource) or covers(held_resource, resource)):
        return either_x
    if resource == "workspace" and held_resource.startswith("file:"):
        return either_x
    if resource.startswith("file:") and held_resource == "workspace":
        dirty_read = owner == "edge" and mode == "S" and holder.startswith("core:")
        return either_x and not dirty_read
    return False


def compatible(owner: str, lock: LockRequest, other_owner: str, other: LockRequest) -> bool:
    """Whether two owners may hold these locks at once: one must have been allowed to join the
    other. Dirty reads are one-way (edge joins a core's exec, never the reverse), and a task may
    resume after a lock granted later than its own, so the order of entry proves nothing."""
    return not (
        conflicts(owner, lock, other_owner, other) and conflicts(other_owner, other, owner, lock)
    )


@dataclass
class Model:
    """The lock table restated naively: lists of grants and waiters, rules checked pairwise."""

    grants: list[tuple[str, Lockset]] = field(default_factory=list)
    queue: list[tuple[str, Lockset, Waiter]] = field(default_factory=list)

    def held(self) -> list[tuple[str, LockRequest]]:
        return [(owner, lock) for owner, lockset in self.grants for lock in lockset]

    def holdings_of(self, owner: str) -> dict[str, str]:
        return {lock.resource: lock.mode for o, lock in self.held() if o == owner}

    def misuse(self, owner: str, lockset: Lockset) -> bool:
        queued = {r for o, ls, _ in self.queue if o == owner for r in ls.resources}
        return not lockset.resources.isdisjoint(self.holdings_of(owner).keys() | queued)

    def blocked(
        self, owner: str, lockset: Lockset, ahead: list[tuple[str, Lockset, Waiter]]
    ) -> bool:
        held = [(o, lock) for o, lock in self.held() if o != owner]
        core_exec = any(lock == ("workspace", "X") for _, lock in held)
        for lock in lockset:
            if any(conflicts(owner, lock, holder, h) for holder, h in held):
                return True
            dirty_read = owner == "edge" and lock.mode == "S" and lock.resource.startswith("file:")
            if dirty_read and core_exec:
                continue
            reserved = [r for _, ls, _ in ahead for r in ls if r.mode == "X"]
            if any(conflicts(owner, lock, "", r) for r in reserved):
                return True
        return False

    def wake(self) -> list[Waiter]:
        granted: list[Waiter] = []
        ahead: list[tuple[str, Lockset, Waiter]] = []
        for entry in list(self.queue):
            owner, lockset, waiter = entry
            if self.blocked(owner, lockset, ahead):
                ahead.append(entry)
            else:
                self.queue.remove(entry)
                self.grants.append((owner, lockset))
                granted.append(waiter)
        return granted


class LockTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        clock = itertools.count()
        self.table = LockTable(clock=lambda: float(next(clock)))
        self.model = Model()

    @rule(owner=st.sampled_from(OWNERS), lockset=locksets)
    def acquire(self, owner: str, lockset: Lockset) -> None:
        if self.model.misuse(owner, lockset):
            with pytest.raises(LockUsageError):
                self.table.acquire(owner, lockset)
            return
        grantable = not self.model.blocked(owner, lockset, self.model.queue)
        assert self.table.can_grant(owner, lockset) is grantable
        waiter = self.table.acquire(owner, lockset)
        assert (waiter is None) is grantable
        if waiter is None:
            self.model.grants.append((owner, lockset))
        else:
            self.model.queue.append((owner, lockset, waiter))

    @precondition(lambda self: self.model.grants)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        owner, lockset = self.model.grants.pop(
            data.draw(st.integers(0, len(self.model.grants) - 1))
        )
        assert list(self.table.release(owner, lockset)) == self.model.wake()

    @precondition(lambda self: self.model.queue)
    @rule(data=st.data())
    def cancel_waiter(self, data: st.DataObject) -> None:
        _, _, waiter = self.model.queue.pop(data.draw(st.integers(0, len(self.model.queue) - 1)))
        assert list(self.table.withdraw(waiter)) == self.model.wake()

    @rule(owner=st.sampled_from(OWNERS[1:]))
    def release_all(self, owner: str) -> None:
        withdrawn = [w for o, _, w in self.model.queue if o == owner]
        self.model.queue = [e for e in self.model.queue if e[0] != owner]
        self.model.grants = [g for g in self.model.grants if g[0] != owner]
        assert self.table.release_all(owner) == (tuple(withdrawn), tuple(self.model.wake()))

    @invariant()
    def matches_the_model(self) -> None:
        for owner in OWNERS:
            assert self.table.holders_of(owner) == self.model.holdings_of(owner)
        assert self.table.waiters() == tuple(w for _, _, w in self.model.queue)

    @invariant()
    def held_locks_are_compatible(self) -> None:
        held = []
        for info in self.table.snapshot():
            if info.mode == "FREE":
                assert not info.holders
                assert info.waiters
                assert info.held_since is None
            else:
                assert info.holders
                assert info.held_since is not None
            assert info.mode != "X" or len(info.holders) == 1
            mode: Mode = "X" if info.mode == "X" else "S"
            held += [(o, LockRequest(info.resource, mode)) for o in info.holders]
        for (o1, l1), (o2, l2) in itertools.combinations(held, 2):
            assert o1 == o2 or compatible(o1, l1, o2, l2)

    @invariant()
    def the_first_waiter_waits_only_for_holders(self) -> None:
        if self.model.queue:
            owner, lockset, _ = self.model.queue[0]
            assert self.model.blocked(owner, lockset, [])

    def teardown(self) -> None:
        """Release every grant in turn: every waiter must get in, and nothing may be left."""
        while self.model.grants:
            owner, lockset = self.model.grants.pop(0)
            assert list(self.table.release(owner, lockset)) == self.model.wake()
        assert self.model.queue == []
        assert self.table.idle
        assert self.table.snapshot() == []
        assert self.table.acquire("core:z", Lockset.of("workspace:X")) is None


TestLockTableMachine = LockTableMachine.TestCase
TestLockTableMachine.settings = settings(max_examples=250, stateful_step_count=40, deadline=None)


Call = tuple[Lockset, int, str | None]
"""One tool call of a lane: its lockset, how many loop steps it holds it, and optionally a lane
it cancels just before releasing (edge cancelling a core by name, §7.2) — which lands the
cancellation and the grant that the release makes in the same loop iteration."""
Plan = list[Call]
Cancel = tuple[int, str, bool]
"""(loop step, owner, also release_all) — the arbiter cancelling a lane from outside."""


@st.composite
def schedules(draw: st.DrawFn) -> tuple[dict[str, Plan], list[Cancel]]:
    targets = st.none() | st.sampled_from(OWNERS)
    calls = st.lists(st.tuples(locksets, st.integers(0, 3), targets), min_size=1, max_size=4)
    plans = {owner: draw(calls) for owner in OWNERS}
    cancels = draw(
        st.lists(st.tuples(st.integers(0, 25), st.sampled_from(OWNERS), st.booleans()), max_size=3)
    )
    return plans, cancels


async def run_schedule(plans: dict[str, Plan], cancels: list[Cancel]) -> None:
    manager = LockManager()
    inside: dict[str, Lockset] = {}
    tasks: dict[str, asyncio.Task[None]] = {}

    async def lane(owner: str, plan: Plan) -> None:
        for lockset, steps, target in plan:
            async with manager.hold(owner, lockset):
                for holder, held in inside.items():
                    for lock, other in itertools.product(lockset, held):
                        assert compatible(owner, lock, holder, other), (owner, lock, holder, other)
                inside[owner] = lockset
                try:
                    for _ in range(steps):
                        await asyncio.sleep(0)
                finally:
                    inside.pop(owner, None)
                if target is not None and target != owner:
                    tasks[target].cancel()

    tasks.update((owner, asyncio.create_task(lane(owner, plan))) for owner, plan in plans.items())
    for step in range(26):
        for at, owner, revoke in cancels:
            if at == step:
                tasks[owner].cancel()
                if revoke and owner != "edge":
                    manager.release_all(owner)
                    inside.pop(owner, None)
        await asyncio.sleep(0)
    async with asyncio.timeout(1):  # a deadlock would hang here
        results = await asyncio.gather(*tasks.values(), return_exceptions=True)
    for result in results:
        if result is not None and not isinstance(result, asyncio.CancelledError):
            raise result
    assert manager.idle
    assert manager.snapshot() == []


@settings(max_examples=300, deadline=None)
@given(schedules())
def test_random_async_schedules_keep_every_rule(
    schedule: tuple[dict[str, Plan], list[Cancel]],
) -> None:
    asyncio.run(run_schedule(*schedule))
