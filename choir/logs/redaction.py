"""The process-wide registry of secret values and the redaction every log line passes through.

Secret values must never reach a log (DESIGN-NOTES "Secrets"). Code that handles secrets is careful
not to log them; this registry is the backstop. choird registers every value of secrets.json when it
loads, stages or reloads them, and the JSON-lines formatter runs `redact_json` over each finished
line, so a secret is caught wherever it slipped in: the message, a structured field, or an
exception's text. choir-agent registers the secrets its session received (GET_SECRETS), and its
commit log redacts every event with them before it is committed (`mentions_secret`,
`redact_data`): whatever a tool prints never reaches choird, Postgres or the model provider.

Each secret is matched as it is and, when it is long enough to make that safe, in the encodings a
tool commonly prints it in: percent-encoded (a URL), and base64 — at each of the three alignments
a value can have inside a longer base64 text, so `Authorization: Basic base64(user:token)` is
caught whatever the user name. Those forms are matched as they are (`redact`, for any text), as
JSON escapes them inside a string (`redact_json`, for a finished log line) and as UTF-8 bytes of
that (`mentions_secret`, for an event's canonical JSON).

The state is one immutable snapshot (the values and a compiled alternation per form) swapped by a
single assignment, so the hot path takes no lock and never sees a half-built pattern.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

import orjson

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 4
"""Shorter values are ignored: redacting every "on" or "42" would shred the log and hide nothing."""
MIN_ENCODED_LENGTH = 8
"""Values at least this long are matched in their encodings too; a base64 fragment of a shorter
one would be short enough to turn up in unrelated text."""


@dataclass(frozen=True)
class _Snapshot:
    values: frozenset[str]
    plain: re.Pattern[str] | None
    """Matches the values (and their encodings) as they are."""
    json: re.Pattern[str] | None
    """Matches them as they appear inside a JSON string (quotes and backslashes escaped)."""
    canonical: re.Pattern[bytes] | None
    """`json` as UTF-8 bytes: what canonical JSON (orjson) holds."""


_EMPTY = _Snapshot(frozenset(), None, None, None)
_snapshot = _EMPTY
_write_lock = threading.Lock()


def _json_escaped(value: str) -> str:
    """How `value` appears inside a JSON string; the form the formatted line actually contains."""
    return orjson.dumps(value).decode()[1:-1]


def _alternation(forms: Iterable[str]) -> re.Pattern[str]:
    return re.compile(_trie_pattern(forms))


def _trie_pattern(forms: Iterable[str]) -> str:
    """One regex matching any of `forms`, shaped as their prefix trie.

    A flat `a|b|c` makes the engine try every form at every position; the trie tries one branch
    per distinct next character, which scans about 1.5 times faster with a few dozen forms. At a
    node where one form ends and a longer one goes on, the longer is tried first (greedy `?`), so
    a secret that contains another is redacted whole.
    """
    trie: dict[str, Any] = {}
    for form in set(forms):
        node = trie
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node_pattern(trie)


def _node_pattern(node: dict[str, Any]) -> str:
    # iterative along single-child chains, so a long secret never nests deeply
    literal: list[str] = []
    while len(node) == 1 and "" not in node:
        [(char, node)] = node.items()
        literal.append(re.escape(char))
    branches = [re.escape(char) + _node_pattern(child) for char, child in node.items() if char]
    if not branches:
        return "".join(literal)
    optional = "?" if "" in node else ""
    return "".join(literal) + "(?:" + "|".join(sorted(branches)) + ")" + optional


def _forms(value: str) -> Iterator[str]:
    """`value` and, when it is long enough, the encodings a tool may print it in."""
    yield value
    if len(value) < MIN_ENCODED_LENGTH:
        return
    yield quote(value, safe="")
    yield quote_plus(value, safe="")
    yield from _base64_fragments(value.encode())


def _base64_fragments(data: bytes) -> Iterator[str]:
    """The base64 characters that encode `data` wherever it sits in a longer encoded text: one
    fragment per alignment (0, 1 or 2 bytes before it in its 3-byte group), without the edge
    characters that also carry bits of the neighbouring bytes. Standard and URL-safe alphabets."""
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + data).decode()
        start = -(-shift * 8 // 6)  # characters carrying bits of the bytes before
        end = (shift + len(data)) * 8 // 6  # the last one may carry bits of the bytes after
        fragment = encoded[start:end]
        if len(fragment) >= MIN_ENCODED_LENGTH:
            yield fragment
            yield fragment.replace("+", "-").replace("/", "_")


def _build(values: frozenset[str]) -> _Snapshot:
    if not values:
        return _EMPTY
    forms = {form for value in values for form in _forms(value)}
    escaped = {_json_escaped(form) for form in forms}
    canonical = re.compile(_alternation(escaped).pattern.encode())
    return _Snapshot(values, _alternation(forms), _alternation(escaped), canonical)


def _kept(values: Iterable[str]) -> frozenset[str]:
    return frozenset(value for value in values if len(value) >= MIN_SECRET_LENGTH)


def register_secrets(values: Iterable[str]) -> None:
    """Add `values` to the redacted set (values shorter than 4 characters are ignored)."""
    global _snapshot
    added = _kept(values)
    with _write_lock:
        if not added <= _snapshot.values:
            _snapshot = _build(_snapshot.values | added)


def replace_secrets(values: Iterable[str]) -> None:
    """Make `values` the whole redacted set in one atomic swap (after secrets.json is reloaded)."""
    global _snapshot
    kept = _kept(values)
    with _write_lock:
        _snapshot = _build(kept)


def mentions_secret(data: bytes) -> bool:
    """Whether canonical JSON `data` holds a registered secret (one regex scan; False at once
    when none is registered). `redact_data` then scrubs the document it was made from."""
    pattern = _snapshot.canonical
    return pattern is not None and pattern.search(data) is not None


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `[REDACTED]`."""
    pattern = _snapshot.plain
    return text if pattern is None else pattern.sub(REDACTED, text)


def redact_json(line: str) -> str:
    """A JSON document with every registered secret in its strings (and keys, and the text of its
    numbers) replaced by `[REDACTED]`; the result is always valid JSON.

    The hot path is one regex scan of the line. Only a line that holds a secret is parsed, scrubbed
    value by value and re-encoded: substituting inside the encoded text could cut through an escape
    sequence or a bare number and leave a line no JSON reader accepts.
    """
    snapshot = _snapshot
    if snapshot.json is None or snapshot.json.search(line) is None:
        return line
    return orjson.dumps(redact_data(orjson.loads(line))).decode()


def redact_data(value: Any) -> Any:
    """A copy of JSON-shaped `value` with every registered secret in its strings (and keys, and
    the text of its numbers) replaced by `[REDACTED]`; `value` itself is left as it was."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(key): redact_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_data(item) for item in value]
    text = orjson.dumps(value).decode()
    return value if redact(text) == text else redact(text)
