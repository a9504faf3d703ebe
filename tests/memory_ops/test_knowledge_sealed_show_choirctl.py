"""`choirctl knowledge show` on an encrypted item whose sealed value was corrupted (a flipped
bit in its ciphertext), against a real choird holding the memory's key: the item's text says it
does not open and why, in one line — never a traceback, never the placeholder stored for every
sealed item as if it were the content — and the answer is exit 0 (the item is there)."""

from __future__ import annotations

import base64
import secrets

import pytest

from choir.core.memory.knowledge.graph import ItemFields
from choir.core.memory.sealed_items import SEALED_KEY
from choir.home import ChoirHome
from tests.harness.memory_encryption import encrypt_personal

from .conftest import Filled
from .test_memory_choirctl import run


@pytest.fixture
def home(home: ChoirHome) -> ChoirHome:
    return encrypt_personal(home)


async def test_a_corrupted_sealed_item_reads_as_one_that_does_not_open(filled: Filled) -> None:
    assert filled.daemon.services is not None
    filled.daemon.services.memory_keys.hold("agent-1", secrets.token_bytes(32))
    put = await run(
        filled, "knowledge", "put", "agent-1", "my pet is a cat named Mochi", "--name",
        "user.pet", "--memory", "personal", "--user", "console",
    )  # fmt: skip
    assert put.code == 0, put.err
    opened = await run(filled, "knowledge", "show", "agent-1", "user.pet")
    assert "my pet is a cat named Mochi" in opened.out, opened

    item = await filled.store.get_knowledge("agent-1", "user.pet")
    sealed = base64.b64decode(item.data[SEALED_KEY])
    broken = sealed[:-1] + bytes([sealed[-1] ^ 1])
    await filled.store.write_knowledge(
        "agent-1",
        "user.pet",
        None,
        fields=ItemFields(data={SEALED_KEY: base64.b64encode(broken).decode()}),
    )

    shown = await run(filled, "knowledge", "show", "agent-1", "user.pet")
    shown_json = (await run(filled, "knowledge", "show", "agent-1", "user.pet", "--json")).json()

    assert (shown.code, shown.err) == (0, ""), shown
    assert "Traceback" not in shown.out
    assert "Mochi" not in shown.out
    text = shown.out.split("text:\n", 1)[1].strip()
    assert text.startswith("(encrypted, does not open: a sealed value of agent-1/personal "), text
    assert len(text.splitlines()) == 1
    assert shown_json["text"] == text
