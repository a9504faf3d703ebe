"""Archives of log files: `logs/archive/<source>/<timestamp>.log.gz` (§22.2).

Archiving first *renames* the active file into the archive directory (`<timestamp>.log`, the
staged copy) and only then compresses it. The rename is atomic, so a line is always in exactly one
place: the active file or the staged copy. Compression writes `<timestamp>.log.gz.tmp`, fsyncs it,
renames it over the final name and only then deletes the staged copy. A crash at any point leaves
either a staged copy, which `compress_pending` finishes on the next start, or a complete archive —
never a lost or a doubled line.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from choir.home import ChoirHome
from choir.logs.locking import exclusive

_NAME = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)(?:_(?P<n>\d+))?\.log(?P<gz>\.gz)?")


def log_path(home: ChoirHome, source: str) -> Path:
    """The active log file of `source`: `logs/choird.log` or `logs/<agent-id>.log`."""
    return home.choird_log if source == "choird" else home.agent_log(source)


def archive_dir(home: ChoirHome, source: str) -> Path:
    return home.log_archive / source


def archive_stamp(moment: datetime) -> str:
    """`moment` in UTC as `20261126T010203Z`, the stem of an archive's name."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _order(path: Path) -> tuple[str, int]:
    match = _NAME.fullmatch(path.name)
    return (match["stamp"], int(match["n"] or 0)) if match else (path.name, 0)


def archived_logs(home: ChoirHome, source: str) -> list[Path]:
    """The finished archives of `source`, oldest first."""
    folder = archive_dir(home, source)
    if not folder.is_dir():
        return []
    found = [path for path in folder.iterdir() if (m := _NAME.fullmatch(path.name)) and m["gz"]]
    return sorted(found, key=_order)


def every_archive(home: ChoirHome, source: str) -> list[Path]:
    """Every archive of `source`, oldest first: finished (`.log.gz`) or still being compressed
    (the staged `.log`), one path per archive (the finished one while both exist)."""
    folder = archive_dir(home, source)
    if not folder.is_dir():
        return []
    found: dict[str, Path] = {}
    for path in folder.iterdir():
        if _NAME.fullmatch(path.name):
            staged = path.name.removesuffix(".gz")
            if staged not in found or path.name.endswith(".gz"):
                found[staged] = path
    return sorted(found.values(), key=_order)


def last_archive(home: ChoirHome, source: str) -> Path | None:
    """The newest archive of `source`, finished (`.log.gz`) or still being compressed (the staged
    `.log`, complete since its rename); None when there is none."""
    folder = archive_dir(home, source)
    if not folder.is_dir():
        return None
    found = [path for path in folder.iterdir() if _NAME.fullmatch(path.name)]
    if not found:
        return None
    return max(found, key=lambda path: (*_order(path), path.name.endswith(".gz")))


def stage(active: Path, folder: Path, moment: datetime | None = None) -> Path:
    """Move `active` into `folder` under a fresh `<timestamp>[_n].log` name; returns the new path.

    Two archives in the same second get `_1`, `_2`…; `archived_logs` orders them numerically.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # logs/ and all in it are private
    stamp = archive_stamp(moment or datetime.now(UTC))
    for n in range(1_000_000):
        stem = stamp if n == 0 else f"{stamp}_{n}"
        staged, final = folder / f"{stem}.log", folder / f"{stem}.log.gz"
        if not staged.exists() and not final.exists():
            os.replace(active, staged)
            return staged
    raise FileExistsError(f"no free archive name for {stamp} in {folder}")


def compress(staged: Path) -> Path:
    """Gzip `staged` into `<staged>.gz` (mode 0600) atomically, then delete `staged`."""
    final = staged.with_name(f"{staged.name}.gz")
    temp = staged.with_name(f"{final.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as raw:
        with (
            gzip.GzipFile(filename=staged.name, mode="wb", fileobj=raw) as packed,
            staged.open("rb") as source,
        ):
            shutil.copyfileobj(source, packed, 1 << 20)
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(temp, final)
    _fsync_dir(final.parent)
    staged.unlink()
    return final


def compress_pending(folder: Path) -> list[Path]:
    """Finish archives a crash interrupted: compress every staged `.log` left in `folder`."""
    if not folder.is_dir():
        return []
    staged = sorted(
        (path for path in folder.iterdir() if (m := _NAME.fullmatch(path.name)) and not m["gz"]),
        key=_order,
    )
    return [compress(path) for path in staged]


def archive_agent_log(home: ChoirHome, agent_id: str) -> Path | None:
    """Archive `logs/<agent-id>.log` when a session ends; None when there is nothing to archive.

    Close any handler still writing the file first: lines written through an already open file
    after the rename would land in the staged copy after it was compressed. Blocking (gzip):
    from async code call it through `asyncio.to_thread`.
    """
    active, folder = log_path(home, agent_id), archive_dir(home, agent_id)
    compress_pending(folder)
    try:
        fd = os.open(active, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        # under the live archiver's lock: it must never copy and empty a file staged here
        with exclusive(fd):
            if os.fstat(fd).st_size == 0:
                active.unlink()
                return None
            staged = stage(active, folder)
    finally:
        os.close(fd)
    return compress(staged)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
