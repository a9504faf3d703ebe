"""What `choir.protocol.docstrings` reads from a source file, kept beside its bytecode.

Parsing a source file is most of that reader's cost (~70 %, ~6 % of choir-agent's CPU to
INIT_HELLO), and its result changes only with the file. It is written into the file's
`__pycache__` (`<name>.<cache tag>.docs.json`) where that folder exists — an installed choir's,
which pip compiled, or a checkout's that ran — keyed by a digest of the source's bytes, and read
back by the next process instead of parsing. Not by its modification time: an image's layers keep
that to the second only, so a key made at the build never matched in a container. Bytecode's switch
(PYTHONDONTWRITEBYTECODE) does not apply: images set it, and their build's import of the agent
is what leaves the caches there for every container. A cache that cannot be read or written, or
was made from another version of the file, is ignored: the file is parsed as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any, Final

import orjson

REVISION: Final = 2
"""Bumped whenever what a cache holds changes meaning."""

Found = dict[str, list[tuple[int, int, dict[str, str]]]]
"""Qualified class name -> (first line, last line, attribute -> docstring) per class statement."""


def load(filename: str, source: bytes) -> Found | None:
    """The cached result for `filename` holding `source`, or None."""
    path = _path(filename)
    if path is None:
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("key") != _key(source):
        return None
    return _found(data.get("classes"))


def store(filename: str, source: bytes, found: Found) -> None:
    """Keep `found` for the next process, in an existing `__pycache__`; best effort."""
    path = _path(filename)
    if path is None:
        return
    data = orjson.dumps({"key": _key(source), "classes": found})
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(data)  # no folder made: none where no bytecode is
        os.replace(temporary, path)  # readers see the whole file or none
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def _path(filename: str) -> Path | None:
    if not filename.endswith(".py"):
        return None
    try:
        return Path(importlib.util.cache_from_source(filename)).with_suffix(".docs.json")
    except (NotImplementedError, ValueError):  # no cache tag, or an odd path
        return None


def _key(source: bytes) -> list[int | str]:
    return [REVISION, len(source), hashlib.blake2b(source, digest_size=16).hexdigest()]


def _found(classes: Any) -> Found | None:
    """`classes` as read back, checked: anything unexpected is a cache to ignore."""
    if not isinstance(classes, dict):
        return None
    found: Found = {}
    for name, statements in classes.items():
        if not isinstance(statements, list):
            return None
        found[name] = []
        for statement in statements:
            if not (isinstance(statement, list) and len(statement) == 3):
                return None
            first, last, docs = statement
            if not (isinstance(first, int) and isinstance(last, int) and isinstance(docs, dict)):
                return None
            if not all(isinstance(value, str) for value in docs.values()):
                return None
            found[name].append((first, last, docs))
    return found
