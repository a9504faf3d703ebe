"""Memory classes and roles (`choir.core.memory.access`), every class x role x op x owner."""

from __future__ import annotations

import itertools

import pytest

from choir.core.memory.access import (
    Grant,
    MemoryAccess,
    MemoryClass,
    Op,
    Role,
    check_grants,
    readable,
    refusal,
    role_of,
    session_refusal,
)

S, K, A, P = MemoryClass.SYSTEM, MemoryClass.KNOWLEDGE, MemoryClass.APP, MemoryClass.PERSONAL
R, RW = Role.READ, Role.READ_WRITE
LEGACY = MemoryAccess("ada")
"""An agent with no `memories` entry."""


def allowed(access: MemoryAccess, target: str, cls: MemoryClass, op: Op, user: str | None) -> bool:
    return refusal(access, target, cls, op, user=user) is None


# The whole table for an agent with no `memories` entry: (owner is self, class) -> (read, write).
LEGACY_TABLE = {
    (True, S): (True, False),
    (True, K): (True, True),
    (True, A): (True, True),
    (True, P): (True, True),
    (False, S): (False, False),
    (False, K): (True, False),
    (False, A): (True, False),
    (False, P): (False, False),
}


@pytest.mark.parametrize(("own", "cls"), list(LEGACY_TABLE))
def test_no_memories_entry_keeps_the_behaviour_before_classes(own: bool, cls: MemoryClass) -> None:
    target = "ada" if own else "bob"
    want_read, want_write = LEGACY_TABLE[own, cls]
    assert allowed(LEGACY, target, cls, Op.READ, "tg-alice") is want_read
    assert allowed(LEGACY, target, cls, Op.WRITE, "tg-alice") is want_write


# Another agent's memory granted with each role: what it allows, (read, write); None: no entry.
GRANTED_TABLE = {
    (S, None): (False, False),
    (S, R): (True, False),
    (S, RW): (True, False),  # config validation refuses it; the decision caps it anyway
    (K, None): (False, False),
    (K, R): (True, False),
    (K, RW): (True, False),
    (A, None): (False, False),
    (A, R): (True, False),
    (A, RW): (True, True),
    (P, None): (False, False),
    (P, R): (False, False),
    (P, RW): (False, False),
}


@pytest.mark.parametrize(("cls", "role"), list(GRANTED_TABLE))
def test_another_agents_memory_is_reached_only_as_granted(
    cls: MemoryClass, role: Role | None
) -> None:
    grants = () if role is None else (Grant("bob", cls, role),)
    access = MemoryAccess("ada", grants)
    want_read, want_write = GRANTED_TABLE[cls, role]
    assert allowed(access, "bob", cls, Op.READ, "tg-alice") is want_read
    assert allowed(access, "bob", cls, Op.WRITE, "tg-alice") is want_write
    # a grant for bob says nothing about carol
    assert not allowed(access, "carol", cls, Op.READ, "tg-alice")


@pytest.mark.parametrize(("cls", "role"), itertools.product(MemoryClass, [None, R, RW]))
def test_own_memory_entry_narrows_never_widens(cls: MemoryClass, role: Role | None) -> None:
    grants = () if role is None else (Grant("ada", cls, role),)
    access = MemoryAccess("ada", grants)
    writable = cls is not S and role is not R
    assert allowed(access, "ada", cls, Op.READ, "tg-alice")
    assert allowed(access, "ada", cls, Op.WRITE, "tg-alice") is writable
    assert role_of(access, "ada", cls) is (RW if writable else R)


@pytest.mark.parametrize("op", list(Op))
def test_personal_memory_needs_a_user(op: Op) -> None:
    message = refusal(LEGACY, "ada", P, op, user=None)
    assert message is not None
    assert "no user" in message
    assert "ada/personal" in message


def test_personal_memory_of_another_agent_is_refused_whatever_config_says() -> None:
    access = MemoryAccess("ada", (Grant("bob", P, RW),))
    message = refusal(access, "bob", P, Op.READ, user="tg-alice")
    assert message is not None
    assert message.startswith("memory bob/personal is personal")


def test_refusals_name_the_memory_class_role_and_the_fix() -> None:
    not_attached = refusal(MemoryAccess("ada", ()), "bob", A, Op.WRITE, user=None)
    assert not_attached == (
        "memory bob/app (app class) is not attached to ada: add "
        '{"agent": "bob", "class": "app", "role": "read-write"} '
        "to agents.ada.memories in config.json"
    )
    system = refusal(LEGACY, "ada", S, Op.WRITE, user=None)
    assert system is not None
    assert "system class" in system
    assert "choirctl knowledge" in system
    others = refusal(LEGACY, "bob", K, Op.WRITE, user=None)
    assert others is not None
    assert "read-only to other agents" in others
    narrowed = refusal(MemoryAccess("ada", (Grant("ada", K, R),)), "ada", K, Op.WRITE, user=None)
    assert narrowed is not None
    assert "set its role to read-write" in narrowed
    app_read = refusal(MemoryAccess("ada", (Grant("bob", A, R),)), "bob", A, Op.WRITE, user=None)
    assert app_read is not None
    assert "attached read-only" in app_read
    for message in (not_attached, system, others, narrowed, app_read):
        assert "\n" not in message


def test_readable_lists_the_classes_a_search_covers() -> None:
    assert readable(LEGACY, "ada", user="tg-alice") == (S, K, A, P)
    assert readable(LEGACY, "ada", user=None) == (S, K, A)
    assert readable(LEGACY, "bob", user="tg-alice") == (K, A)
    assert readable(MemoryAccess("ada", (Grant("bob", S, R),)), "bob", user="u") == (S,)
    assert readable(MemoryAccess("ada", ()), "bob", user="u") == ()


def test_session_memory_of_another_agent_follows_its_knowledge_grant() -> None:
    assert session_refusal(LEGACY, "bob") is None
    assert session_refusal(MemoryAccess("ada", ()), "ada") is None
    assert session_refusal(MemoryAccess("ada", (Grant("bob", K, R),)), "bob") is None
    message = session_refusal(MemoryAccess("ada", (Grant("bob", A, RW),)), "bob")
    assert message is not None
    assert '"class": "knowledge"' in message


def test_check_grants_reports_every_bad_entry() -> None:
    grants = [
        Grant("ada", S, RW),
        Grant("bob", P, R),
        Grant("bob", K, RW),
        Grant("zed", A, R),
        Grant("bob", A, R, encrypted=True),
        Grant("bob", A, RW),
        Grant("bob", S, R),
        Grant("ada", P, RW, encrypted=True),
    ]
    problems = check_grants("ada", grants, ["ada", "bob"])
    assert problems == [
        "agents.ada.memories[0]: system memory is read-only to its own agent; use role read "
        "(the operator writes it (choirctl knowledge put|write … --memory system))",
        "agents.ada.memories[1]: personal memory belongs to bob's users; no other agent can be "
        "granted it",
        "agents.ada.memories[2].role: another agent's knowledge memory is granted read only; "
        "use role read",
        "agents.ada.memories[3].agent: unknown agent 'zed' (known: ada, bob)",
        "agents.ada.memories[4].encrypted: only an agent's own memory is marked encrypted (its "
        "owner's entry, under agents.bob.memories)",
        "agents.ada.memories[5]: a second entry for bob/app; keep one",
    ]


def test_an_item_with_an_owner_is_seen_by_its_agents_sessions_of_that_user_and_the_operator():
    from choir.core.memory.access import EVERYONE, viewer

    assert viewer("ada", "ada", "alice").sees("alice")
    assert viewer("ada", "ada", "alice").sees("")  # nobody's: as before
    assert not viewer("ada", "ada", "bob").sees("alice")
    assert not viewer("ada", "ada", None).sees("alice")  # a session with no user
    assert not viewer("bob", "ada", "alice").sees("alice")  # another agent, same user
    assert viewer("bob", "ada", "alice").sees("")
    assert EVERYONE.sees("alice")
