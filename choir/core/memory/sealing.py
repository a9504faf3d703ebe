"""Sealing an encrypted memory's content at rest (seed design 003): AES-256-GCM under a key the
operator holds, checked without storing it.

    key = parse_key(Path("memory.key").read_bytes())       # 32 bytes: raw, hex or base64
    sealed = seal(key, b'{"text": "..."}', b"ada/personal", nonce=secrets.token_bytes(12))
    plain = open_sealed(key, sealed, b"ada/personal")      # or SealBroken
    verify_key(key, stored_check)                          # or WrongMemoryKey

A sealed value is `version (1 byte) ‖ nonce (12) ‖ ciphertext ‖ tag (16)`. `context` (the
memory it belongs to) is authenticated, not stored: a value copied into another memory does not
open. A wrong key and a tampered value fail the same way in GCM, so a wrong key is told apart
first, by `key_check` — an HMAC of a constant under the key, which says nothing about the key
and lets choird refuse a wrong one at the agent's start, before it reads anything. Pure: the
caller draws the nonce (a fresh random one per seal).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final

from choir.errors import UsageError

KEY_BYTES: Final = 32
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
VERSION: Final = b"\x01"
_CHECK_LABEL: Final = b"choir memory key check v1"


class SealError(UsageError):
    """A key or a sealed value choir cannot use; the message names the fix."""


class BadMemoryKey(SealError):
    """Key material that is not a 256-bit key."""


class WrongMemoryKey(SealError):
    """A well-formed key that is not the one the memory was sealed with."""


class SealBroken(SealError):
    """A sealed value that does not open: altered, cut short, or from another memory."""


def parse_key(raw: bytes) -> bytes:
    """The 32-byte key in `raw`: 32 bytes as they are, or 64 hex digits, or base64 of 32 bytes
    (surrounding whitespace ignored). Anything else is refused, naming how to make one."""
    if len(raw) == KEY_BYTES:
        return raw
    text = raw.strip()
    make = "make one with: head -c 32 /dev/urandom > memory.key"
    if len(text) == 2 * KEY_BYTES:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) == KEY_BYTES:
        return decoded
    raise BadMemoryKey(
        f"the memory key is not a 256-bit key (32 bytes, 64 hex digits or base64 of 32 "
        f"bytes; got {len(raw)} bytes); {make}"
    )


def key_check(key: bytes) -> bytes:
    """What choird stores to recognise `key` later (it reveals nothing of the key)."""
    return hmac.new(_checked(key), _CHECK_LABEL, hashlib.sha256).digest()


def verify_key(key: bytes, check: bytes, memory: str = "the encrypted memory") -> None:
    """Return if `key` is the one `check` was made from; else `WrongMemoryKey`."""
    if not hmac.compare_digest(key_check(key), check):
        raise WrongMemoryKey(
            f"the memory key does not open {memory}: it is not the key its items were "
            "sealed with; start the agent with the key file it was first started with"
        )


def seal(key: bytes, plaintext: bytes, context: bytes, *, nonce: bytes) -> bytes:
    """`plaintext` sealed under `key`, bound to `context`; `nonce` must never repeat under a
    key (draw 12 random bytes per call)."""
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"a nonce is {NONCE_BYTES} bytes, not {len(nonce)}")
    # imported at first use: choird on the process runtime loads no cryptography at start
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return VERSION + nonce + AESGCM(_checked(key)).encrypt(nonce, plaintext, context)


def open_sealed(key: bytes, sealed: bytes, context: bytes) -> bytes:
    """The plaintext of `sealed`, or `SealBroken` (check the key first: `verify_key`)."""
    if sealed[:1] != VERSION:
        raise SealBroken(
            f"a sealed value of {context.decode(errors='replace')} is not in a format this "
            "choir knows (its first byte); it was written by another version or altered"
        )
    if len(sealed) < 1 + NONCE_BYTES + TAG_BYTES:
        raise SealBroken(
            f"a sealed value of {context.decode(errors='replace')} is cut short "
            f"({len(sealed)} bytes)"
        )
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce, body = sealed[1 : 1 + NONCE_BYTES], sealed[1 + NONCE_BYTES :]
    try:
        return AESGCM(_checked(key)).decrypt(nonce, body, context)
    except InvalidTag:
        raise SealBroken(
            f"a sealed value of {context.decode(errors='replace')} does not open: it was "
            "altered, or sealed for another memory or under another key"
        ) from None


def _checked(key: bytes) -> bytes:
    if len(key) != KEY_BYTES:
        raise BadMemoryKey(f"a memory key is {KEY_BYTES} bytes, not {len(key)}")
    return key
