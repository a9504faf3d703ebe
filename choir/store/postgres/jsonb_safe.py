"""Any string a tool or a model can produce, stored in Postgres and read back exactly.

Postgres refuses U+0000 in `text` and `jsonb` ("unsupported Unicode escape sequence"), and one
NUL in a tool's output or a model's reply is all it takes. So U+0000 is escaped on the way in
and restored on the way out, with U+0001 as the escape character:

    U+0000  ->  U+0001 "0"
    U+0001  ->  U+0001 "1"

(a prefix code, so decoding is exact and every other character is stored as it is). What an
agent committed and hashed is what comes back, byte for byte: the hash chain verifies after a
round trip. Escaping U+0001 itself costs only values that hold it, and it is ASCII, so the
scheme works whatever the server's encoding.

jsonb is escaped on orjson's output, as bytes: a NUL there is always the six characters
`\\u0000` (U+0001 is `\\u0001`), and only an escape preceded by an even number of backslashes is
one (`\\\\u0000` is a backslash and the text `u0000`). Postgres writes jsonb back with the same
escapes, so reading undoes it the same way. The common case — neither escape present — is one
substring search each way and no copy, so the ingest path keeps its speed.

Lone surrogates never get here: orjson refuses them on the wire, and the agent replaces them
before it hashes an event (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

_NUL: Final = b"\\u0000"
_SOH: Final = b"\\u0001"
_CONTROL: Final = b"\\u000"
_ESCAPES_IN: Final = re.compile(rb"\\\\|\\u000[01]")
"""An escaped backslash (kept, so what follows it is never read as an escape), or NUL/SOH."""
_ESCAPES_OUT: Final = re.compile(rb"\\\\|\\u0001[01]")
_ENCODE: Final = {_NUL: _SOH + b"0", _SOH: _SOH + b"1"}
_DECODE: Final = {_SOH + b"0": _NUL, _SOH + b"1": _SOH}


def encode_json(value: Any) -> bytes:
    """`value` as JSON text Postgres accepts as jsonb (orjson, NUL escaped)."""
    data = orjson.dumps(value)
    if _CONTROL in data:  # one scan finds both (and other rare control characters)
        return _ESCAPES_IN.sub(_swap_in, data)
    return data


def decode_json(data: bytes, start: int = 0) -> Any:
    """The value `encode_json` stored, from the JSON text Postgres returns in `data[start:]`
    (an offset rather than a slice: the common case copies nothing)."""
    if data.find(_SOH, start) != -1:
        return orjson.loads(_ESCAPES_OUT.sub(_swap_out, data[start:]))
    return orjson.loads(memoryview(data)[start:])


def encode_text(text: str) -> str:
    """`text` as a Postgres `text` value (NUL escaped)."""
    if "\x00" in text or "\x01" in text:
        return text.replace("\x01", "\x011").replace("\x00", "\x010")
    return text


def decode_text(text: str) -> str:
    """The string `encode_text` stored."""
    if "\x01" in text:
        return re.sub("\x01([01])", lambda m: "\x00" if m[1] == "0" else "\x01", text)
    return text


def _swap_in(match: re.Match[bytes]) -> bytes:
    return _ENCODE.get(match[0], match[0])


def _swap_out(match: re.Match[bytes]) -> bytes:
    return _DECODE.get(match[0], match[0])
