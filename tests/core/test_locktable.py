"""The §9 lock rules as tables: (held state, queued waiters, request) -> granted?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pytest

from choir.core.locks.lockset import Lockset, LockUsageError
from choir.core.locks.table import LockInfo, LockTable, LockWait, Waiter

Grant = tuple[str, tuple[str, ...]]
"""(owner, locks) — e.g. ("core:a", ("workspace:X",))."""


class Case(NamedTuple):
    held: Sequence[Grant]
    request: Grant
    granted: bool
    queued: Sequence[Grant] = ()


def table_with(held: Sequence[Grant], queued: Sequence[Grant] = ()) -> LockTable:
    table = LockTable(clock=lambda: 0.0)
    for owner, locks in held:
        assert table.acquire(owner, Lockset(locks)) is None, f"setup: {owner} {locks} not granted"
    for owner, locks in queued:
        assert table.acquire(owner, Lockset(locks)) is not None, f"setup: {owner} {locks} granted"
    return table


A, B, C = "core:a", "core:b", "core:c"

RULES = {
    # §9.1: one resource
    "free S": Case([], ("edge", ("file:x:S",)), True),
    "free X": Case([], (A, ("file:x:X",)), True),
    "S + S": Case([(A, ("file:x:S",))], ("edge", ("file:x:S",)), True),
    "S blocks X": Case([(A, ("file:x:S",))], (B, ("file:x:X",)), False),
    "X blocks S": Case([(A, ("file:x:X",))], ("edge", ("file:x:S",)), False),
    "X blocks X": Case([(A, ("file:x:X",))], (B, ("file:x:X",)), False),
    "X on different files": Case([(A, ("file:src/auth.go:X",))], (B, ("file:auth_test:X",)), True),
    "own locks never conflict": Case([(A, ("file:x:X",))], (A, ("file:y:X",)), True),
    # §9.2: workspace dominates file:<path>, both directions
    "ws X blocks file S": Case([(A, ("workspace:X",))], (B, ("file:x:S",)), False),
    "ws X blocks file X": Case([(A, ("workspace:X",))], (B, ("file:x:X",)), False),
    "ws X blocks edge file X": Case([(A, ("workspace:X",))], ("edge", ("file:x:X",)), False),
    "file S blocks ws X": Case([("edge", ("file:x:S",))], (A, ("workspace:X",)), False),
    "file X blocks ws X": Case([(B, ("file:x:X",))], (A, ("workspace:X",)), False),
    "own file lock allows ws X": Case([(A, ("file:x:S",))], (A, ("workspace:X",)), True),
    "own ws X allows file": Case([(A, ("workspace:X",))], (A, ("file:x:X",)), True),
    "ws S allows file S": Case([(A, ("workspace:S",))], (B, ("file:x:S",)), True),
    "ws S blocks file X": Case([(A, ("workspace:S",))], (B, ("file:x:X",)), False),
    "shared ws S blocks own file X": Case(
        [(A, ("workspace:S",)), (B, ("workspace:S",))], (A, ("file:x:X",)), False
    ),
    "file X blocks ws S": Case([(A, ("file:x:X",))], (B, ("workspace:S",)), False),
    "file S allows ws S": Case([(A, ("file:x:S",))], (B, ("workspace:S",)), True),
    "ws S + ws S": Case([(A, ("workspace:S",))], (B, ("workspace:S",)), True),
    "ws S blocks ws X": Case([(A, ("workspace:S",))], (B, ("workspace:X",)), False),
    "ws X blocks ws S": Case([(A, ("workspace:X",))], ("edge", ("workspace:S",)), False),
    # §9.2 hierarchy: a directory's lock covers everything under it, S/X as on one resource
    "dir X blocks file S": Case([(A, ("file:src:X",))], (B, ("file:src/a.py:S",)), False),
    "dir S blocks file X": Case([(A, ("file:src:S",))], (B, ("file:src/a.py:X",)), False),
    "dir S allows file S": Case([(A, ("file:src:S",))], (B, ("file:src/a.py:S",)), True),
    "file X blocks dir S": Case([(A, ("file:src/a.py:X",))], (B, ("file:src:S",)), False),
    "file S blocks dir X": Case([(A, ("file:src/pkg/a.py:S",))], (B, ("file:src:X",)), False),
    "file S allows dir S": Case([(A, ("file:src/a.py:S",))], (B, ("file:src:S",)), True),
    "root search blocks any write": Case([("edge", ("file:.:S",))], (A, ("file:x/y:X",)), False),
    "any write blocks root search": Case([(A, ("file:x/y:X",))], ("edge", ("file:.:S",)), False),
    "root search + reads": Case([("edge", ("file:.:S",))], (A, ("file:x:S",)), True),
    "deep X blocks top X": Case([(A, ("file:a/b/c/d:X",))], (B, ("file:a:X",)), False),
    "a name prefix is no parent": Case([(A, ("file:src:X",))], (B, ("file:src2/a:X",)), True),
    "sibling dirs independent": Case([(A, ("file:src/a:X",))], (B, ("file:src/b/c:X",)), True),
    "own dir lock allows own file": Case([(A, ("file:src:X",))], (A, ("file:src/a.py:X",)), True),
    "shared dir S blocks own file X": Case(
        [(A, ("file:src:S",)), (B, ("file:src:S",))], (A, ("file:src/a.py:X",)), False
    ),
    "other owners under a dir block X": Case(
        [(A, ("file:src/a:S",)), (B, ("file:src/b:S",))], (A, ("file:src:X",)), False
    ),
    "no dirty read past a dir X": Case(
        [(A, ("workspace:X", "file:src:X"))], ("edge", ("file:src/a.py:S",)), False
    ),
    "queued dir X blocks new file S": Case(
        [(A, ("file:src/a:S",))], ("edge", ("file:src/b:S",)), False, [(B, ("file:src:X",))]
    ),
    "queued file X blocks new dir S": Case(
        [(A, ("file:src/a:S",))], (C, ("file:src:S",)), False, [(B, ("file:src/a:X",))]
    ),
    "queued file X spares other dirs": Case(
        [(A, ("file:src/a:S",))], (C, ("file:lib:S",)), True, [(B, ("file:src/a:X",))]
    ),
    # §9.4: dirty read — edge only, file S only, against a core's workspace:X
    "dirty read": Case([(A, ("workspace:X",))], ("edge", ("file:x:S",)), True),
    "no dirty read for cores": Case([("edge", ("workspace:X",))], (A, ("file:x:S",)), False),
    "no dirty read past file X": Case(
        [(A, ("workspace:X", "file:x:X"))], ("edge", ("file:x:S",)), False
    ),
    # §9.2: choirtmp and the reserved namespaces are independent of the workspace
    "choirtmp under ws X": Case([(A, ("workspace:X",))], (B, ("choirtmp:X",)), True),
    "ws X under choirtmp": Case([(A, ("choirtmp:X",))], (B, ("workspace:X",)), True),
    "choirtmp X blocks X": Case([(A, ("choirtmp:X",))], ("edge", ("choirtmp:X",)), False),
    "browser_tab X blocks": Case([(A, ("browser_tab:X",))], (B, ("browser_tab:X",)), False),
    "mem under ws X": Case([(A, ("workspace:X",))], (B, ("mem:w:X",)), True),
    "ext providers independent": Case([(A, ("ext:smtp:X",))], (B, ("ext:imap:X",)), True),
    "net same service": Case([(A, ("net:brave:X",))], (B, ("net:brave:S",)), False),
    # §9.3: all or nothing
    "one busy lock blocks the set": Case(
        [(A, ("file:a:X",))], (B, ("file:b:X", "file:a:S", "choirtmp:X")), False
    ),
    "empty lockset always": Case([(A, ("workspace:X",))], ("edge", ()), True),
    # §9.4: writer preference — a queued X reserves its resources against later requests
    "queued writer blocks new S": Case(
        [(A, ("file:x:S",))], ("edge", ("file:x:S",)), False, [(B, ("file:x:X",))]
    ),
    "queued writer spares other files": Case(
        [(A, ("file:x:S",))], ("edge", ("file:y:S",)), True, [(B, ("file:x:X",))]
    ),
    "queued ws X blocks new file S": Case(
        [(A, ("file:x:S",))], ("edge", ("file:y:S",)), False, [(B, ("workspace:X",))]
    ),
    "queued file X blocks new ws S": Case(
        [(A, ("file:x:S",))], (C, ("workspace:S",)), False, [(B, ("file:x:X",))]
    ),
    "queued writers are served in order": Case(
        [(A, ("file:y:X",))], (C, ("file:x:X",)), False, [(B, ("file:x:X", "file:y:X"))]
    ),
    "queued ws X blocks new file X": Case(
        [("edge", ("file:x:S",))], (C, ("file:y:X",)), False, [(B, ("workspace:X",))]
    ),
    "queued reader reserves nothing": Case(
        [(A, ("file:y:X",))], (B, ("file:x:X",)), True, [("edge", ("file:x:S", "file:y:S"))]
    ),
    "queued writer spares choirtmp": Case(
        [(A, ("file:x:S",))], ("edge", ("choirtmp:S",)), True, [(B, ("file:x:X",))]
    ),
    "queued choirtmp X blocks S": Case(
        [(A, ("choirtmp:S",))], ("edge", ("choirtmp:S",)), False, [(B, ("choirtmp:X",))]
    ),
    "dirty read passes queued ws X": Case(
        [(A, ("workspace:X",))], ("edge", ("file:y:S",)), True, [(B, ("workspace:X",))]
    ),
    "dirty read passes queued file X": Case(
        [(A, ("workspace:X",))], ("edge", ("file:x:S",)), True, [(B, ("file:x:X",))]
    ),
    "no dirty read without a ws X holder": Case(
        [(A, ("file:x:S",))], ("edge", ("file:y:S",)), False, [(B, ("workspace:X",))]
    ),
    "queued ws X blocks a core's file S": Case(
        [(A, ("workspace:X",))], (C, ("file:y:S",)), False, [(B, ("workspace:X",))]
    ),
}


@pytest.mark.parametrize("case", RULES.values(), ids=RULES.keys())
def test_rule(case: Case) -> None:
    table = table_with(case.held, case.queued)
    owner, locks = case.request
    lockset = Lockset(locks)

    held_before = table.holders_of(owner)

    assert table.can_grant(owner, lockset) is case.granted
    waiter = table.acquire(owner, lockset)

    assert (waiter is None) is case.granted
    expected = held_before | (dict(lockset.requests) if case.granted else {})
    assert table.holders_of(owner) == expected


MISUSE = {
    "S to X upgrade": ([(A, ("file:x:S",))], (A, ("file:x:X",)), "upgrades are not allowed"),
    "re-acquire S": ([(A, ("file:x:S",))], (A, ("file:x:S", "file:y:S")), "already holds"),
    "re-acquire X": ([(A, ("workspace:X",))], (A, ("workspace:X",)), "already holds"),
    "X then S": ([("edge", ("choirtmp:X",))], ("edge", ("choirtmp:S",)), "already holds"),
    "bad owner": ([], ("arbiter", ("file:x:S",)), "'edge' or 'core:<job-name>'"),
}


@pytest.mark.parametrize(("held", "request_", "message"), MISUSE.values(), ids=MISUSE.keys())
def test_misuse_raises_and_changes_nothing(
    held: Sequence[Grant], request_: Grant, message: str
) -> None:
    table = table_with(held)
    before = table.snapshot()
    owner, locks = request_

    with pytest.raises(Exception, match=message):
        table.acquire(owner, Lockset(locks))
    with pytest.raises(Exception, match=message):
        table.can_grant(owner, Lockset(locks))
    assert table.snapshot() == before


def test_asking_again_for_a_resource_already_awaited_raises() -> None:
    table = table_with([(A, ("file:x:X",))], [(B, ("file:x:S",))])

    with pytest.raises(LockUsageError, match="already waits for file:x"):
        table.acquire(B, Lockset.of("file:x:S", "file:y:S"))
    assert table.acquire(B, Lockset.of("file:y:S")) is None


@pytest.mark.parametrize(
    ("held", "release"),
    [
        ((), "file:x:S"),
        (("file:x:S",), "file:x:X"),
        (("file:x:X",), "file:x:S"),
        (("file:x:S",), "file:y:S"),
    ],
)
def test_releasing_what_is_not_held_raises_and_releases_nothing(
    held: tuple[str, ...], release: str
) -> None:
    table = table_with([(A, (*held, "choirtmp:X"))])

    with pytest.raises(LockUsageError, match="does not hold"):
        table.release(A, Lockset.of(release, "choirtmp:X"))
    assert table.holders_of(A)["choirtmp"] == "X"


def test_waiters_are_granted_in_fifo_order_and_writers_block_later_readers() -> None:
    table = table_with([(A, ("file:x:X",))])
    reader = table.acquire("edge", Lockset.of("file:x:S"))
    writer = table.acquire(B, Lockset.of("file:x:X"))
    late_reader = table.acquire(C, Lockset.of("file:x:S"))
    assert table.waiters() == (reader, writer, late_reader)

    assert table.release(A, Lockset.of("file:x:X")) == (reader,)
    assert table.release("edge", Lockset.of("file:x:S")) == (writer,)
    assert table.release(B, Lockset.of("file:x:X")) == (late_reader,)
    assert table.release(C, Lockset.of("file:x:S")) == ()
    assert table.idle


def test_a_release_grants_every_compatible_waiter_at_once() -> None:
    table = table_with([(A, ("workspace:X",))])
    waiters = [table.acquire(B, Lockset.of("file:a:X")), table.acquire(C, Lockset.of("file:b:S"))]

    assert table.release(A, Lockset.of("workspace:X")) == tuple(waiters)
    assert table.holders_of(B) == {"file:a": "X"}
    assert table.holders_of(C) == {"file:b": "S"}


def test_a_waiter_holds_nothing_until_its_whole_lockset_is_free() -> None:
    table = table_with([(A, ("file:b:X",)), (C, ("file:a:S",))])
    waiter = table.acquire(B, Lockset.of("file:a:S", "file:b:S"))

    assert waiter is not None
    assert table.holders_of(B) == {}
    assert table.release(A, Lockset.of("file:b:X")) == (waiter,)
    assert table.holders_of(B) == {"file:a": "S", "file:b": "S"}


def test_workspace_x_waits_for_every_file_lock() -> None:
    table = table_with([("edge", ("file:a:S",)), (B, ("file:b:X",))])
    exec_call = table.acquire(A, Lockset.of("workspace:X"))

    assert table.release("edge", Lockset.of("file:a:S")) == ()
    assert table.release(B, Lockset.of("file:b:X")) == (exec_call,)


def test_withdrawing_a_writer_lets_the_readers_it_blocked_in() -> None:
    table = table_with([(A, ("file:x:S",))])
    writer = table.acquire(B, Lockset.of("file:x:X"))
    reader = table.acquire("edge", Lockset.of("file:x:S"))
    assert writer is not None
    assert reader is not None

    assert table.withdraw(writer) == (reader,)
    with pytest.raises(LockUsageError, match="is not waiting"):
        table.withdraw(writer)


def test_release_all_drops_locks_and_requests_of_one_owner() -> None:
    table = table_with(
        [(A, ("workspace:X",)), (A, ("choirtmp:X",)), (C, ("browser_tab:X",))],
        [(A, ("browser_tab:X",)), (B, ("file:y:X",))],
    )
    own, blocked = table.waiters()

    assert table.release_all(A) == ((own,), (blocked,))
    assert table.holders_of(A) == {}
    assert table.waiters() == ()
    assert table.release_all(A) == ((), ())


def test_snapshot_shows_mode_holders_waiters_and_since() -> None:
    now = iter([1.0, 2.0, 3.0, 4.0])
    table = LockTable(clock=lambda: next(now))
    table.acquire(B, Lockset.of("file:x:S"))
    table.acquire("edge", Lockset.of("file:x:S"))
    table.acquire(A, Lockset.of("workspace:X"))
    table.acquire(C, Lockset.of("file:x:X", "choirtmp:S"))

    assert table.snapshot() == [
        LockInfo("choirtmp", "FREE", (), (LockWait(C, "S", 4.0),), None),
        LockInfo("file:x", "S", ("core:b", "edge"), (LockWait(C, "X", 4.0),), 1.0),
        LockInfo("workspace", "FREE", (), (LockWait(A, "X", 3.0),), None),
    ]


def test_held_since_is_when_the_resource_left_free() -> None:
    now = iter([5.0, 6.0, 7.0])
    table = LockTable(clock=lambda: next(now))
    table.acquire(A, Lockset.of("file:x:S"))
    table.acquire(B, Lockset.of("file:x:S"))
    table.release(A, Lockset.of("file:x:S"))

    assert [(i.holders, i.held_since) for i in table.snapshot()] == [(("core:b",), 5.0)]
    table.release(B, Lockset.of("file:x:S"))
    table.acquire(A, Lockset.of("file:x:X"))
    assert [(i.mode, i.held_since) for i in table.snapshot()] == [("X", 7.0)]


def test_table_is_idle_after_everything_is_released() -> None:
    table = table_with([(A, ("workspace:X", "file:a:X")), ("edge", ("file:b:S",))])
    waiter = table.acquire(B, Lockset.of("workspace:S"))
    assert isinstance(waiter, Waiter)
    assert not table.idle

    table.release(A, Lockset.of("workspace:X", "file:a:X"))
    table.release("edge", Lockset.of("file:b:S"))
    table.release(B, Lockset.of("workspace:S"))

    assert table.idle
    assert table.snapshot() == []
    assert table.acquire(C, Lockset.of("workspace:X")) is None
