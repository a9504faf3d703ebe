"""A content write to an encrypted memory, sealed with the key choird holds: the one place the
agent's tool (`choir.daemon.memory.tools.host`) and the operator's verbs
(`choir.daemon.operator.memory.access`) seal what they store.

    if is_encrypted(agents, "ada", "personal"):
        text, data = sealed_content(keys, "ada", "personal", "likes tea", None, existing)

A write that leaves the text or the data out keeps the item's own, opened with the key and
sealed again with the new part; without the key it is `MemoryLocked` (nothing written). No
vector is ever made of a sealed item: its text is the placeholder (`SEALED_TEXT`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from choir.core.memory.sealed_items import SEALED_TEXT, is_sealed, open_item, seal_item
from choir.core.memory.sealing import NONCE_BYTES
from choir.daemon.memory.keys import MemoryKeys, MemoryLocked, classes_of, locked_message

if TYPE_CHECKING:
    from choir.config.model import AgentConfig
    from choir.store.knowledge.items import KnowledgeItem


def is_encrypted(agents: Mapping[str, AgentConfig], agent: str, memory_class: str) -> bool:
    """Whether `agent`'s `memory_class` memory is marked encrypted in config.json."""
    return memory_class in {c.value for c in classes_of(agents, agent)}


def sealing_key(keys: MemoryKeys, agent: str, memory_class: str) -> bytes:
    """The key choird holds for `agent`; `MemoryLocked` (one line naming the fix) without."""
    key = keys.key(agent)
    if key is None:
        raise MemoryLocked(locked_message(agent, memory_class))
    return key


def sealed_content(
    keys: MemoryKeys,
    agent: str,
    memory_class: str,
    text: str | None,
    data: dict[str, Any] | None,
    existing: KnowledgeItem | None,
) -> tuple[str, dict[str, Any]]:
    """The (text, data) to store for a write of `text` and `data` to `agent`'s encrypted
    `memory_class` memory; either left out (None) keeps the existing item's (a new item's
    text is the caller's to check: without one, `ValueError`)."""
    key = sealing_key(keys, agent, memory_class)
    if existing is not None and (text is None or data is None):
        kept_text, kept_data = existing.text, existing.data
        if is_sealed(existing.data):
            opened = open_item(key, agent, memory_class, existing.data)
            kept_text, kept_data = opened.text, opened.data
        text = kept_text if text is None else text
        data = kept_data if data is None else data
    if text is None:
        raise ValueError("a new item's text is checked by the caller")
    return seal_item(
        key, agent, memory_class, text, data or {}, nonce=secrets.token_bytes(NONCE_BYTES)
    )


def sealed_version(
    keys: MemoryKeys, agent: str, memory_class: str, text: str, data: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """A restored version's (text, data) in an encrypted memory: a sealed one as it is (it
    opens with the same key: nothing is opened or written in the clear, no key needed); one
    written in the clear before the memory was marked encrypted, sealed now with the key."""
    if is_sealed(data) and text == SEALED_TEXT:
        return text, data
    key = sealing_key(keys, agent, memory_class)
    if is_sealed(data):  # text in the clear beside a sealed value: never stored so by choir
        data = open_item(key, agent, memory_class, data).data
    return seal_item(key, agent, memory_class, text, data, nonce=secrets.token_bytes(NONCE_BYTES))
