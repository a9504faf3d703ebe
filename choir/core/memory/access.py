"""Who may read and write which memory (seed design 003's memory classes), as one pure decision.

    access = MemoryAccess("ada", grants=(Grant("bob", MemoryClass.APP, Role.READ_WRITE),))
    refused = refusal(access, "bob", MemoryClass.APP, Op.WRITE, user="tg-alice")  # None: allowed

Every agent owns four memories, one per class, kept in its own schema:

- `system`: the agent's own definition (identity, skills). Read-only to the agent; the operator
  writes it (`choirctl knowledge`). Another agent reads it only when granted `read`.
- `knowledge`: reference content. Read-write to its agent; another agent reads it when granted
  (`read` only: reference content has one author).
- `app`: shared records. Read-write to its agent; another agent reads or writes it as granted.
- `personal`: per user — the user of the session (its bound DM). Read-write to its agent, and
  only the items of the session's own user; never another agent's, whatever config says.

Whatever choird derives from a session of a user (its session memory, compaction archives, tool
sequence, summary, and the roll-ups over that user's summaries) is that user's: knowledge class,
but with the session's user as `owner_user`. An item with an owner is seen by its own agent in a
session of that same user only, and by the operator (`Viewer`); never by another agent, grants
notwithstanding, nor by a session of another user or of none.

An agent with no `memories` entry in config.json keeps the behaviour choir had before classes:
its own memories as above, and every other agent's `knowledge` and `app` memory (and session
memory) readable. With a `memories` list, another agent's memory is reachable only as listed,
and an entry for the agent's own memory can narrow its role (never widen it: `system` stays
read-only). The one call site choird-side is `choir.daemon.memory.access`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class MemoryClass(StrEnum):
    SYSTEM = "system"
    KNOWLEDGE = "knowledge"
    APP = "app"
    PERSONAL = "personal"


class Role(StrEnum):
    READ = "read"
    READ_WRITE = "read-write"


class Op(StrEnum):
    READ = "read"
    WRITE = "write"


OWN_ROLE: Final = {
    MemoryClass.SYSTEM: Role.READ,
    MemoryClass.KNOWLEDGE: Role.READ_WRITE,
    MemoryClass.APP: Role.READ_WRITE,
    MemoryClass.PERSONAL: Role.READ_WRITE,
}
"""An agent's role on its own memories; a config entry may narrow it, never widen it."""
OTHERS_MAX: Final = {
    MemoryClass.SYSTEM: Role.READ,
    MemoryClass.KNOWLEDGE: Role.READ,
    MemoryClass.APP: Role.READ_WRITE,
}
"""The widest role another agent may be granted on each class (personal: none at all)."""
LEGACY_READABLE: Final = frozenset({MemoryClass.KNOWLEDGE, MemoryClass.APP})
"""Another agent's classes an agent with no `memories` entry reads (as before classes)."""
ENCRYPTABLE: Final = frozenset({MemoryClass.PERSONAL, MemoryClass.APP})
"""The classes an agent's own memory may be `encrypted` in: choird itself writes session
summaries and archives into knowledge memory whether or not it holds the key, and system
memory is the agent's definition, which the operator writes while the agent is stopped (no key
held). (The operator's writes to an encrypted personal or app memory are sealed with the key
choird holds, refused without it.)"""
OPERATOR_WRITES: Final = "the operator writes it (choirctl knowledge put|write … --memory system)"


@dataclass(frozen=True, slots=True)
class Grant:
    """One `memories` entry of config.json: `agent`'s memory of `memory_class`, with `role`."""

    agent: str
    memory_class: MemoryClass
    role: Role
    encrypted: bool = False


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """What one agent may reach: its id and its `memories` entries (None: no entry at all)."""

    agent: str
    grants: tuple[Grant, ...] | None = None

    def grant(self, target: str, memory_class: MemoryClass) -> Grant | None:
        if self.grants is None:
            return None
        return next(
            (g for g in self.grants if g.agent == target and g.memory_class is memory_class), None
        )


def role_of(access: MemoryAccess, target: str, memory_class: MemoryClass) -> Role | None:
    """The caller's role on `target`'s memory of `memory_class`; None: not reachable."""
    granted = access.grant(target, memory_class)
    if target == access.agent:
        own = OWN_ROLE[memory_class]
        return Role.READ if granted is not None and granted.role is Role.READ else own
    widest = OTHERS_MAX.get(memory_class)
    if widest is None:
        return None
    if access.grants is None:
        return Role.READ if memory_class in LEGACY_READABLE else None
    if granted is None:
        return None
    return Role.READ if Role.READ in (granted.role, widest) else Role.READ_WRITE


def refusal(
    access: MemoryAccess,
    target: str,
    memory_class: MemoryClass,
    op: Op,
    *,
    user: str | None,
) -> str | None:
    """Why `access.agent` may not `op` `target`'s `memory_class` memory, in one line naming the
    memory, its class and role and what would allow it; None when it may. `user` is the
    session's user (personal memory is that user's only; None: the session has none)."""
    memory = f"memory {target}/{memory_class.value}"
    if memory_class is MemoryClass.PERSONAL and target != access.agent:
        return (
            f"{memory} is personal: it belongs to {target}'s users and no other agent can read "
            "or write it; ask the user, or keep shared records in app memory"
        )
    if memory_class is MemoryClass.PERSONAL and user is None:
        return f"{memory} is personal, per user, and this session has no user (no bound DM)"
    role = role_of(access, target, memory_class)
    if role is None:
        wanted = OTHERS_MAX[memory_class] if op is Op.WRITE else Role.READ
        return (
            f"{memory} ({memory_class.value} class) is not attached to {access.agent}: add "
            f'{{"agent": "{target}", "class": "{memory_class.value}", "role": "{wanted.value}"}} '
            f"to agents.{access.agent}.memories in config.json"
        )
    if op is Op.READ or role is Role.READ_WRITE:
        return None
    if target == access.agent and memory_class is MemoryClass.SYSTEM:
        return (
            f"{memory} is the agent's own definition (system class), read-only to it; "
            f"{OPERATOR_WRITES}"
        )
    if target == access.agent:
        return (
            f"{memory} ({memory_class.value} class) is attached read-only by "
            f"agents.{access.agent}.memories in config.json; set its role to read-write there"
        )
    if OTHERS_MAX[memory_class] is Role.READ:
        return (
            f"{memory} ({memory_class.value} class) is read-only to other agents; "
            f"ask {target} to write it, or write your own {memory_class.value} memory"
        )
    return (
        f"{memory} (app class) is attached read-only to {access.agent}: set its role to "
        f"read-write in agents.{access.agent}.memories in config.json"
    )


def readable(access: MemoryAccess, target: str, *, user: str | None) -> tuple[MemoryClass, ...]:
    """The classes of `target`'s memory a search by `access.agent` covers (personal: only with
    a user, and only the caller's own)."""
    return tuple(c for c in MemoryClass if refusal(access, target, c, Op.READ, user=user) is None)


def session_refusal(access: MemoryAccess, target: str) -> str | None:
    """Why the caller may not read `target`'s session memory (its past conversations, which hold
    its users' words): its own always; another agent's with no `memories` entry (as before
    classes) or when granted that agent's knowledge memory."""
    if target == access.agent or access.grants is None:
        return None
    if access.grant(target, MemoryClass.KNOWLEDGE) is not None:
        return None
    return (
        f"session memory of {target} is not attached to {access.agent}: add "
        f'{{"agent": "{target}", "class": "knowledge", "role": "read"}} '
        f"to agents.{access.agent}.memories in config.json"
    )


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who reads an agent's memory, as far as the owner of an item goes: a session of `user`
    (None: a session with no user) of the agent itself, or anyone else; `everyone` is the
    operator, who sees every item."""

    user: str | None
    everyone: bool = False

    def sees(self, owner: str) -> bool:
        """Whether an item owned by `owner` ("": nobody's) exists for this reader."""
        return self.everyone or not owner or owner == self.user


EVERYONE: Final = Viewer(None, everyone=True)
"""The operator (choirctl, the console): every user's items, with their owner shown."""


def viewer(caller: str, target: str, user: str | None) -> Viewer:
    """The reader a session of `user` of agent `caller` is in `target`'s memory: its own user's
    items in its own memory; in another agent's, only items of no user."""
    return Viewer(user if caller == target else None)


def check_grants(agent: str, grants: Sequence[Grant], agents: Sequence[str]) -> list[str]:
    """The problems of agent `agent`'s `memories` entries, each `<path>: <problem and fix>`."""
    problems = []
    seen: set[tuple[str, MemoryClass]] = set()
    for index, grant in enumerate(grants):
        path = f"agents.{agent}.memories[{index}]"
        key = (grant.agent, grant.memory_class)
        if key in seen:
            problems.append(
                f"{path}: a second entry for {grant.agent}/{grant.memory_class.value}; keep one"
            )
        seen.add(key)
        if grant.agent == agent:
            if grant.encrypted and grant.memory_class not in ENCRYPTABLE:
                problems.append(
                    f"{path}.encrypted: {grant.memory_class.value} memory cannot be encrypted "
                    "(choird or the operator writes it without the key); encrypt personal or "
                    "app memory"
                )
            if grant.memory_class is MemoryClass.SYSTEM and grant.role is Role.READ_WRITE:
                problems.append(
                    f"{path}: system memory is read-only to its own agent; use role read "
                    f"({OPERATOR_WRITES})"
                )
            continue
        if grant.agent not in agents:
            problems.append(
                f"{path}.agent: unknown agent {grant.agent!r} (known: {', '.join(agents)})"
            )
        if grant.encrypted:
            problems.append(
                f"{path}.encrypted: only an agent's own memory is marked encrypted (its owner's "
                f"entry, under agents.{grant.agent}.memories)"
            )
        widest = OTHERS_MAX.get(grant.memory_class)
        if widest is None:
            problems.append(
                f"{path}: personal memory belongs to {grant.agent}'s users; no other agent can "
                "be granted it"
            )
        elif grant.role is Role.READ_WRITE and widest is Role.READ:
            problems.append(
                f"{path}.role: another agent's {grant.memory_class.value} memory is granted "
                "read only; use role read"
            )
    return problems
