"""The POST body of a call, encoded without encoding again what the previous call sent.

A lane's next prompt is its last one plus a message or two: the head (system prompt, identity
files, summary), the window's messages (`choir.core.prompt.window.ShownEvents`) and the tool
entries (the registry's) are the same dict objects from one call to the next. Encoding the whole
body — tens of KB once a session has some history — was the largest single cost of a call in
the agent's own CPU; now each message and tool entry is encoded once, the first time it is sent,
and the body is joined from the encoded pieces.

The bytes are exactly `orjson.dumps(request_body(request))`: compact JSON joins a list's items
with `,` and nothing else. A piece is reused only for the very object it was encoded from
(held here, so its `id()` cannot be reused meanwhile), and only from the same lane's previous
call (edge, core jobs and compaction folds call concurrently): what the caller passes must not
be changed once passed (`CompletionRequest.messages`), which holds for every prompt choir
builds — their messages are shared between prompts and never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from choir.adapters.llm.response import request_body
from choir.adapters.llm.types import CompletionRequest

_Pieces = dict[int, tuple[Mapping[str, Any], bytes]]


class BodyEncoder:
    """Encodes each call's body, reusing the pieces of the previous call's."""

    __slots__ = ("_pieces",)

    LANES: Final = 8
    """Lanes whose previous call's pieces are kept (edge, core jobs); the oldest goes first."""

    def __init__(self) -> None:
        self._pieces: dict[str, _Pieces] = {}
        """By lane: the encoded messages and tool entries of its previous call, by `id()`
        (each with its object, kept alive)."""

    def encode(self, request: CompletionRequest) -> bytes:
        """`orjson.dumps(request_body(request))`, from the pieces already encoded where it can."""
        body = request_body(request)
        messages = body.pop("messages")
        tools = body.pop("tools", None)
        model = body.pop("model")
        before, now = self._pieces.pop(request.lane, None) or {}, _Pieces()
        parts = [b'{"model":', orjson.dumps(model), b',"messages":', _array(messages, before, now)]
        if tools is not None:
            parts += [b',"tools":', _array(tools, before, now)]
        # the rest (temperature, reasoning_effort, max_tokens) in request_body's order
        parts.append(b"," + orjson.dumps(body)[1:] if body else b"}")
        if len(self._pieces) >= self.LANES:
            del self._pieces[next(iter(self._pieces))]
        self._pieces[request.lane] = now
        return b"".join(parts)


def _array(items: Iterable[Mapping[str, Any]], before: _Pieces, now: _Pieces) -> bytes:
    encoded = []
    for item in items:
        key = id(item)
        found = before.get(key) or now.get(key)
        if found is None or found[0] is not item:
            found = (item, orjson.dumps(item))
        now[key] = found
        encoded.append(found[1])
    return b"[" + b",".join(encoded) + b"]"


__all__ = ["BodyEncoder"]
