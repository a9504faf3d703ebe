"""Docker build contexts as deterministic tar archives.

Every entry has a fixed owner (root), mtime (0) and order (sorted), and keeps only the file's
executable bit, so the same inputs always give the same bytes. The hash of those bytes is what
a build is keyed by: an image labelled with it is up to date without asking docker to build.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from fnmatch import fnmatch
from pathlib import Path
from typing import Final

IGNORED: Final = (".git", "__pycache__", "*.pyc")
"""Never put into a context."""


class TarContext:
    """An in-memory build context; add files and trees, then take `data()`."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[bytes, int]] = {}

    def add_bytes(self, name: str, data: bytes, *, executable: bool = False) -> None:
        self._files[name] = (data, 0o755 if executable else 0o644)

    def add_file(self, name: str, source: Path) -> None:
        self.add_bytes(name, source.read_bytes(), executable=os.access(source, os.X_OK))

    def add_tree(self, prefix: str, source: Path) -> None:
        """Every file under `source` (symlinks followed), as `prefix/<relative path>`."""
        for directory, dirs, files in os.walk(source, followlinks=True):
            dirs[:] = sorted(d for d in dirs if not _ignored(d))
            base = Path(directory)
            for name in sorted(files):
                if _ignored(name):
                    continue
                relative = (base / name).relative_to(source).as_posix()
                self.add_file(f"{prefix}/{relative}" if prefix else relative, base / name)

    def names(self) -> list[str]:
        return sorted(self._files)

    def data(self) -> bytes:
        """The uncompressed tar: directories implied, entries sorted, metadata fixed."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for directory in _directories(self._files):
                archive.addfile(_entry(directory, tarfile.DIRTYPE, 0o755, 0))
            for name in sorted(self._files):
                data, mode = self._files[name]
                archive.addfile(_entry(name, tarfile.REGTYPE, mode, len(data)), io.BytesIO(data))
        return buffer.getvalue()


def digest(*parts: bytes | str) -> str:
    """SHA-256 over `parts`, each length-prefixed so no two splits collide."""
    hasher = hashlib.sha256()
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        hasher.update(f"{len(raw)}:".encode())
        hasher.update(raw)
    return hasher.hexdigest()


def _entry(name: str, kind: bytes, mode: int, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size = kind, mode, size
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def _directories(files: dict[str, tuple[bytes, int]]) -> list[str]:
    found = {str(parent) for name in files for parent in Path(name).parents if str(parent) != "."}
    return sorted(found)


def _ignored(name: str) -> bool:
    return any(fnmatch(name, pattern) for pattern in IGNORED)
