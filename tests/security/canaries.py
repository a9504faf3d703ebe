"""Canary secrets and the places a sweep looks for them (`test_canary_sweep`).

A canary is a unique secret value set at the start of a run; afterwards every place it must
not be is searched for it — raw, percent-encoded (a URL), and inside base64 at each of the
three alignments a value can have in a longer encoded text (`Authorization: Basic …`), in the
standard and URL-safe alphabets. The canaries use only characters JSON never escapes, so the
raw form also finds them inside JSON documents; `+` and `/` make the encoded forms differ.

Places are collected as named byte strings (`Sweep.add`) — files (gzip archives read whole),
process environments and command lines, `docker inspect` output, a database dump, what the
model server was sent, command output, screenshots — and searched at the end in one pass.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, quote_plus


def canary(kind: str) -> str:
    """A fresh secret value nothing else on this machine holds."""
    return f"canary+{kind}/{secrets.token_hex(10)}"


def forms(value: str) -> dict[str, bytes]:
    """Every form of `value` a leak may take (see the module docstring)."""
    raw = value.encode()
    found = {
        "raw": raw,
        "percent-encoded": quote(value, safe="").encode(),
        "form-encoded": quote_plus(value, safe="").encode(),
    }
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + raw)
        start = -(-shift * 8 // 6)  # characters that also carry bits of the bytes before
        end = (shift + len(raw)) * 8 // 6  # …and after
        fragment = encoded[start:end]
        found[f"base64 (offset {shift})"] = fragment
        found[f"base64url (offset {shift})"] = fragment.replace(b"+", b"-").replace(b"/", b"_")
    return found


@dataclass(frozen=True)
class Leak:
    place: str
    secret: str
    form: str

    def __str__(self) -> str:
        return f"{self.secret} ({self.form}) in {self.place}"


@dataclass
class Sweep:
    """Places to search, by name; `leaks` searches them all for every canary."""

    canaries: dict[str, str]
    """Secret name → canary value."""
    places: dict[str, bytes] = field(default_factory=dict)

    def add(self, place: str, data: bytes | str) -> None:
        blob = data.encode() if isinstance(data, str) else data
        self.places[place] = self.places.get(place, b"") + blob

    def add_tree(self, root: Path, *, skip: frozenset[Path] = frozenset()) -> int:
        """Every regular file under `root` but `skip` (gzip files decompressed); the count."""
        count = 0
        for path in files_under(root):
            if path in skip:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue  # gone meanwhile
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            self.add(f"file {path}", data)
            count += 1
        return count

    def add_processes(self, when: str) -> int:
        """`/proc/*/environ` and `/proc/*/cmdline` of every process readable now; the count."""
        count = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            for part in ("environ", "cmdline"):
                try:
                    data = (entry / part).read_bytes()
                    command = (entry / "comm").read_text().strip()
                except OSError:
                    continue  # exited, or not ours to read
                self.add(f"/proc/{entry.name}/{part} ({command}, {when})", data)
                count += 1
        return count

    def add_json(self, place: str, value: object) -> None:
        self.add(place, json.dumps(value, default=str))

    def leaks(self) -> list[Leak]:
        found: list[Leak] = []
        for name, value in self.canaries.items():
            patterns = forms(value)
            for place, data in self.places.items():
                found.extend(
                    Leak(place, name, form) for form, pattern in patterns.items() if pattern in data
                )
        return found


def files_under(root: Path) -> Iterator[Path]:
    """Regular files under `root`, not following symlinks."""
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield path
