"""The memory an operator's `knowledge add|put` writes to (`--memory`, `--user`).

The operator is not an agent: it holds every role on every memory (it writes an agent's
`system` memory, its definition, which the agent itself only reads), so nothing here is the
agents' class-and-role check (`choir.daemon.memory.access`). What is checked: the class is one
of the four, a personal item names its user (a configured DM) and no other class does, and an
existing item stays in its memory. A write to an encrypted memory is sealed with the key
choird holds, as the agent's own are (`sealed`, `restored`; refused without the key: nothing is
ever stored in the clear there); `knowledge show` opens an encrypted item while choird holds
its key (`opened`), the list views too (`listed`: "(encrypted, locked)" without it). Each
refusal is a `UsageError` (exit 2), nothing written.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from choir.core.memory.access import MemoryClass
from choir.core.memory.knowledge.graph import ItemFields, Placement
from choir.core.memory.sealed_items import OpenedItem, is_sealed, open_item, readable
from choir.core.memory.sealing import SealError
from choir.daemon.memory.sealed_writes import is_encrypted, sealed_content, sealed_version
from choir.daemon.operator.context import IN_A_DM, OperatorContext
from choir.daemon.operator.memory.graph import fields_of
from choir.errors import NotFoundError, UsageError
from choir.protocol.operator import requests as r

if TYPE_CHECKING:
    from choir.daemon.memory.store import MemoryStore
    from choir.store.knowledge.items import KnowledgeItem
    from choir.store.knowledge.versions import KnowledgeVersion, Restored


async def placed_content(
    ctx: OperatorContext, store: MemoryStore, request: r.KnowledgeAdd | r.KnowledgePut
) -> tuple[str, ItemFields]:
    """The request's text and fields, a new item's memory among them (checked), as stored:
    sealed when the memory is encrypted (`sealed`)."""
    placement = placement_of(ctx, request.memory, request.user)
    existing = None
    if isinstance(request, r.KnowledgePut) and request.name is not None:
        try:
            existing = await store.get_knowledge(request.agent_id, request.name)
        except NotFoundError:
            existing = None
        if (
            existing is not None
            and request.memory is not None
            and (
                existing.memory_class != placement.memory_class
                or existing.owner_user != placement.user
            )
        ):
            where = existing.memory_class + (
                f" of {existing.owner_user}" if existing.owner_user else ""
            )
            raise UsageError(
                f"item {existing.name!r} is in {request.agent_id}'s {where} memory: an item "
                "never changes memory; drop --memory/--user, or add a new item there"
            )
    memory_class = existing.memory_class if existing is not None else placement.memory_class
    fields = replace(fields_of(request), memory=placement)
    text, fields = sealed(ctx, request.agent_id, memory_class, request.text, fields, existing)
    assert text is not None  # an add's and a put's text is required
    return text, fields


def sealed(
    ctx: OperatorContext,
    agent: str,
    memory_class: str,
    text: str | None,
    fields: ItemFields,
    existing: KnowledgeItem | None,
) -> tuple[str | None, ItemFields]:
    """An operator's write to `agent`'s `memory_class` memory as stored: in an encrypted one,
    its text and data sealed with the key choird holds, as the agent's own tool writes are
    (`sealed_writes`; the part left out kept from `existing`); without the key `MemoryLocked`
    (one line naming the fix), nothing written. A write of loc, type, tags or kind only leaves
    the sealed value as it is. From a DM too: what is stored is sealed, and the answer shows
    the sealed value only (`opened` opens nothing for a DM)."""
    if (text is None and fields.data is None) or not is_encrypted(
        ctx.config.agents, agent, memory_class
    ):
        return text, fields
    keys = ctx.services.memory_keys
    stored_text, stored_data = sealed_content(
        keys, agent, memory_class, text, fields.data, existing
    )
    return stored_text, replace(fields, data=stored_data)


def restored(ctx: OperatorContext, agent: str, item: KnowledgeItem) -> Restored | None:
    """How a restore of `item` stores the version it restores: in an encrypted memory, sealed
    (`sealed_version`: a sealed version as it is, one in the clear sealed with the key);
    None (as the version is) elsewhere."""
    if not is_encrypted(ctx.config.agents, agent, item.memory_class):
        return None
    return partial(sealed_version, ctx.services.memory_keys, agent, item.memory_class)


def opened(ctx: OperatorContext, agent: str, item: KnowledgeItem) -> KnowledgeItem:
    """`item` with an encrypted item's text and data opened while choird holds `agent`'s key
    (the operator supplied it); else as stored — the sealed value, never a guess —, the text
    saying why when the key does not open it (a corrupted value: not the placeholder stored
    for every sealed item, which would read as if it were the content)."""
    key = _key(ctx, agent)
    if key is None or not is_sealed(item.data):
        return item
    try:
        content = open_item(key, agent, item.memory_class, item.data)
    except SealError as error:
        return replace(item, text=f"(encrypted, does not open: {error.message})")
    return replace(item, text=content.text, data=content.data)


NOT_IN_A_DM = "(encrypted: opened only in choirctl and the console)"


def _key(ctx: OperatorContext, agent: str) -> bytes | None:
    return None if IN_A_DM.get() else ctx.services.memory_keys.key(agent)


def _shown(
    ctx: OperatorContext, agent: str, memory_class: str, text: str, data: dict[str, Any]
) -> OpenedItem:
    if IN_A_DM.get() and is_sealed(data):
        return OpenedItem(NOT_IN_A_DM, data)
    return readable(_key(ctx, agent), agent, memory_class, text, data)


def listed(ctx: OperatorContext, agent: str, item: KnowledgeItem) -> KnowledgeItem:
    """`item` as the list views show it (`knowledge list`, `knowledge history`, `memory
    about`, the console's Memory tab): an encrypted one opened while choird holds `agent`'s
    key, else its text says it is locked (or does not open) — not the placeholder stored for
    every sealed item, which would read as if it were the content."""
    shown = _shown(ctx, agent, item.memory_class, item.text, item.data)
    return replace(item, text=shown.text, data=shown.data)


def listed_version(
    ctx: OperatorContext, agent: str, item: KnowledgeItem, version: KnowledgeVersion
) -> KnowledgeVersion:
    """A version of `item` as `listed` shows the item (its versions share its memory)."""
    shown = _shown(ctx, agent, item.memory_class, version.text, version.data)
    return replace(version, text=shown.text, data=shown.data)


def placement_of(ctx: OperatorContext, memory: str | None, user: str | None) -> Placement:
    try:
        memory_class = MemoryClass(memory or MemoryClass.KNOWLEDGE)
    except ValueError:
        raise UsageError(
            f"unknown memory {memory!r}: use " + ", ".join(c.value for c in MemoryClass)
        ) from None
    if memory_class is not MemoryClass.PERSONAL:
        if user is not None:
            raise UsageError("--user names a personal item's user; add --memory personal")
        return Placement(memory_class.value)
    dms = sorted(ctx.config.dms)
    if user is None:
        raise UsageError(
            "a personal item belongs to one user: add --user DM (one of " + ", ".join(dms) + ")"
        )
    if user not in ctx.config.dms:
        raise UsageError(f"--user {user!r} is no DM in config.json (known: {', '.join(dms)})")
    return Placement(memory_class.value, user)
