"""Items of a memory marked encrypted after they were written, sealed in place with the key
(`choir.daemon.memory.sealed_backfill`, `choir.store.knowledge.plaintext`): every row in the
clear of the encrypted memories' items — current and versions — sealed, their vectors deleted,
nothing else touched; a second run changes nothing; an item over the write limit when sealed is
sealed all the same; `memory stats` counts sealed items apart."""

from __future__ import annotations

import secrets
from typing import Any

from choir.config.memories import MemoryEntry
from choir.config.model import AgentConfig
from choir.core.memory.knowledge.graph import ItemFields, Placement
from choir.core.memory.sealed_items import SEALED_KEY, SEALED_TEXT, open_item, seal_item
from choir.core.memory.sealing import NONCE_BYTES
from choir.daemon.memory.sealed_backfill import seal_written_before, sealed_notes
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.knowledge.items import KNOWLEDGE_MAX_BYTES
from choir.store.postgres.pool import Pool
from tests.memory.store.support import vec


def _marked(*classes: str) -> AgentConfig:
    entries = [
        MemoryEntry.model_validate({"class": c, "role": "read-write", "encrypted": True})
        for c in classes
    ]
    return AgentConfig.model_construct(memories=entries)


async def _stored(store: PostgresMemoryStore, agent: str, ref: str) -> list[Any]:
    """The item's and each version's (text, data) as stored, and whether it has a vector."""
    item = await store.get_knowledge(agent, ref)
    _, versions = await store.knowledge_history(agent, ref, limit=10)
    return [(item.text, item.data, item.has_vector)] + [(v.text, v.data) for v in versions]


async def test_every_row_in_the_clear_is_sealed_once_and_opens_to_what_it_held(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    key = secrets.token_bytes(32)
    personal = Placement("personal", "console")
    pet = await store.add_knowledge(
        ada, "cat called Miso", name="pet", fields=ItemFields(memory=personal, data={"n": 1})
    )
    # marked, then written by the sealing path: version 2 sealed, version 1 still in the clear
    text, data = seal_item(key, ada, "personal", "cat called Tabby", {}, nonce=bytes(NONCE_BYTES))
    await store.write_knowledge(ada, "pet", text, fields=ItemFields(data=data))
    app = await store.add_knowledge(
        ada, "app setting", name="app.setting", fields=ItemFields(memory=Placement("app"))
    )
    big = "x" * (KNOWLEDGE_MAX_BYTES - 16)  # over the sealed write limit once sealed
    await store.add_knowledge(ada, big, name="big", fields=ItemFields(memory=personal))
    note = await store.add_knowledge(ada, "deploys on Fridays", name="note")
    vectors = [(pet.id, vec(1, 0, 0)), (app.id, vec(0, 1, 0)), (note.id, vec(0, 0, 1))]
    await store.set_vectors(ada, "knowledge", vectors)
    note_before = await _stored(store, ada, "note")

    counts = await seal_written_before(pool, ada, _marked("personal", "app"), key)
    assert counts == {"app": 1, "personal": 2}
    assert sealed_notes(ada, counts) == [
        f"sealed 1 item of {ada}/app written before it was marked encrypted",
        f"sealed 2 items of {ada}/personal written before it was marked encrypted",
    ]
    sealed = {ref: await _stored(store, ada, ref) for ref in ("pet", "app.setting", "big")}
    for rows in sealed.values():
        assert (rows[0][0], list(rows[0][1]), rows[0][2]) == (SEALED_TEXT, [SEALED_KEY], False)
        assert all(t == SEALED_TEXT and list(d) == [SEALED_KEY] for t, d in rows[1:])
    assert [open_item(key, ada, "personal", d).text for t, d in sealed["pet"][1:]] == [
        "cat called Tabby",
        "cat called Miso",
    ]
    assert open_item(key, ada, "personal", sealed["pet"][2][1]).data == {"n": 1}
    assert open_item(key, ada, "app", sealed["app.setting"][0][1]).text == "app setting"
    assert open_item(key, ada, "personal", sealed["big"][0][1]).text == big
    assert await _stored(store, ada, "note") == note_before  # not encrypted: untouched
    stats = await store.stats(ada)
    assert (stats.knowledge_items, stats.knowledge_sealed, stats.vectors_missing) == (4, 3, 0)

    # a second run: nothing in the clear, nothing sealed again (a new nonce would change it)
    assert await seal_written_before(pool, ada, _marked("personal", "app"), key) == {
        "app": 0,
        "personal": 0,
    }
    for ref, rows in sealed.items():
        assert await _stored(store, ada, ref) == rows
    # an agent with no encrypted memory: nothing to do
    assert await seal_written_before(pool, ada, _marked(), key) == {}
