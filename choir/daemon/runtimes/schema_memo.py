"""The tool schemas choird found valid, remembered across its restarts.

choird checks every tool manifest's input schema against Draft 2020-12 when it builds an agent's
tree (`agent_tree`). It does not load jsonschema-rs (5 MB resident), so the first check in a
process costs ~0.15 s of CPU — importing `jsonschema`, then walking the meta-schema for each of
the seed tree's ~20 tools — on the path of the first `agent start` after every choird start.
Two things spare it: the schemas of choir's own seed tools and skills are taken as valid as
they ship (`tests/protocol/test_json_schema_check.py` checks each with `jsonschema`), so an
operator who has not changed them never pays; and the digests of the schemas found valid are
kept in `$CHOIR_HOME/runtime/valid-schemas` and given back to the check at the next start. The
file is headed by choir's version and the check's revision, so a choird that checks differently
starts from nothing; it is as private as the rest of the home, and choir-agent checks every
manifest again with its own checker.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from choir import __version__
from choir.config.scaffolding.scaffold import global_seed_dir
from choir.errors import ChoirError
from choir.home import ChoirHome
from choir.protocol.json_schema import (
    CHECK_REVISION,
    remember_valid,
    schema_digest,
    valid_digests,
)

FILE_NAME: Final = "valid-schemas"
SCHEMA_KEYS: Final = frozenset({"parameters", "input_schema", "output_schema"})
"""Where seed manifests hold schemas: a tool's `llm.parameters`, a skill state's I/O."""
HEADER: Final = f"choir-valid-schemas {CHECK_REVISION} {__version__}"


class SchemaMemo:
    """Loads the remembered digests into the check once, saves them when it learnt more."""

    def __init__(self, home: ChoirHome) -> None:
        self.path = home.root / "runtime" / FILE_NAME
        self._saved: frozenset[bytes] | None = None
        """What needs no saving (the file's and the seeds'), once read."""

    def load(self) -> None:
        """Give the check what the file remembers (nothing when it is missing, unreadable, or
        written by a choird that checks differently); the file is read once per process."""
        if self._saved is not None:
            return
        remember_valid(seed_digests())
        remember_valid(read_digests(self.path))
        self._saved = valid_digests()  # the seeds' are found again at every start

    def save(self) -> None:
        """Write what the check now remembers, when that is more than the file holds; a file
        that cannot be written only costs the next start its check."""
        known = valid_digests()
        if self._saved is not None and known <= self._saved:
            return
        with contextlib.suppress(OSError):
            write_digests(self.path, known)
            self._saved = known


def seed_digests() -> list[bytes]:
    """The digests of the schemas in choir's seed tools and skills (none when the seeds are
    missing: choird then checks them like any other)."""
    try:
        root = global_seed_dir()
    except ChoirError:
        return []
    digests = []
    for path in sorted([*root.glob("tools/*.json"), *root.glob("skills/*.json")]):
        try:
            document = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        for schema in seed_schemas(document):
            digest = schema_digest(schema)
            if digest is not None:
                digests.append(digest)
    return digests


def seed_schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every object under a key of `SCHEMA_KEYS` in a seed manifest."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SCHEMA_KEYS and isinstance(value, dict):
                yield value
            else:
                yield from seed_schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from seed_schemas(item)


def read_digests(path: Path) -> list[bytes]:
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    if not lines or lines[0] != HEADER:
        return []
    digests = []
    for line in lines[1:]:
        with contextlib.suppress(ValueError):
            digests.append(bytes.fromhex(line))
    return digests


def write_digests(path: Path, digests: frozenset[bytes]) -> None:
    """Atomically, private to choird's user."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = "\n".join([HEADER, *sorted(digest.hex() for digest in digests)]) + "\n"
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(text)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
