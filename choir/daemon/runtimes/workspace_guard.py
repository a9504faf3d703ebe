"""A workspace made ready for an agent container, and the host's view of it for `agent verify`.

Before the container starts (the agent holds the workspace's lease, so no other agent runs on
it), `guard_workspace`:

1. narrows the workspace directory to the owner (no group/other bits) — another host user must
   not reach anything an agent leaves there (a setuid copy of a shell, say); modes are only
   ever narrowed, never widened;
2. when choird is root, hands the whole tree over to the agent's own uid:gid (`agent_users`):
   files the operator or a previous agent left become the agent's, so it can work on them
   without any capability. The walk never follows a symlink (every call is relative to an
   open directory, `O_NOFOLLOW`), and leaves alone files with several hard links that are not
   already the agent's — one of them could be a host file outside the workspace — and any
   socket, FIFO or device (the socket check below reports a host socket there);
3. when choird is root, binds the workspace onto itself `nosuid,nodev` (`host_mounts`), which
   docker's bind then carries into the container; undone by `WorkspaceGuard.release` when the
   container is gone.

`scan_sockets` looks (boundedly) for Unix sockets in a workspace: a socket there would hand the
agent whatever listens on it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from choir.adapters import host_mounts
from choir.core.security.host import SocketScan, WorkspaceView
from choir.errors import ChoirError
from choir.home import narrow
from choir.logs import get_logger

log = get_logger("choird.runtime")

MAX_DEPTH: Final = 256
"""Directories deeper than this are not handed over (each level holds one open descriptor)."""
MAX_SCAN_ENTRIES: Final = 50_000
"""Entries `scan_sockets` looks at before it stops (and says the scan was partial)."""


@dataclass
class HandOver:
    """What handing a workspace over changed."""

    changed: int = 0
    linked: list[str] = field(default_factory=list)
    """Files left to their owner because they have several hard links."""
    special: list[str] = field(default_factory=list)
    """Sockets, FIFOs and devices, left to their owner."""
    too_deep: int = 0


@dataclass
class WorkspaceGuard:
    """What `guard_workspace` did that `release` must undo."""

    path: Path
    mount_id: int | None = None

    def release(self) -> None:
        if self.mount_id is None:
            return
        mount_id, self.mount_id = self.mount_id, None
        try:
            host_mounts.unmount(self.path, mount_id)
        except ChoirError as error:
            log.warning(str(error), fields={"workspace": str(self.path)})


def guard_workspace(workspace: Path, uid: int, gid: int, *, privileged: bool) -> WorkspaceGuard:
    """Steps 1-3 of the module docstring; `privileged` when choird runs as root."""
    path = workspace.resolve(strict=True)
    if privileged:
        handed = hand_over(path, uid, gid)
        if handed.changed or handed.linked or handed.special or handed.too_deep:
            log.info(
                "workspace handed over to the agent's uid",
                fields={
                    "workspace": str(path),
                    "uid": uid,
                    "changed": handed.changed,
                    "hard_linked_kept": handed.linked[:10],
                    "special_kept": handed.special[:10],
                    "too_deep": handed.too_deep,
                },
            )
    narrow_mode(path)
    guard = WorkspaceGuard(path)
    if privileged and not host_mounts.is_nosuid_nodev(path):
        guard.mount_id = host_mounts.bind_nosuid(path)
    return guard


def release_leftovers(workspaces: Iterable[str]) -> list[str]:
    """Unmount the nosuid binds a killed choird left on `workspaces` (at start, when no agent
    of this home runs); the paths released."""
    released = []
    for workspace in workspaces:
        path = Path(os.path.realpath(workspace))
        try:
            if host_mounts.unmount_leftover(path):
                released.append(str(path))
        except (OSError, ChoirError) as error:
            log.warning(f"cannot release a leftover workspace mount: {error}")
    return released


def narrow_mode(path: Path) -> None:
    """Take group and other bits off `path` (never add any)."""
    if (was := narrow(path)) is not None:
        log.info("narrowed a workspace to its owner", fields={"path": str(path), "was": oct(was)})


def hand_over(root: Path, uid: int, gid: int) -> HandOver:
    """chown everything under `root` (and `root`) that is not `uid:gid` yet; see the docstring."""
    done = HandOver()
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    os.chown(top, uid, gid)
    stack: list[tuple[int, list[str]]] = [(top, _adopt_entries(top, uid, gid, done))]
    try:
        while stack:
            dirfd, pending = stack[-1]
            if not pending:
                os.close(stack.pop()[0])
                continue
            name = pending.pop()
            if len(stack) >= MAX_DEPTH:
                done.too_deep += 1
                continue
            with contextlib.suppress(OSError):  # gone or replaced by a non-directory: skip
                child = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd
                )
                stack.append((child, _adopt_entries(child, uid, gid, done)))
    finally:
        for dirfd, _ in stack:
            os.close(dirfd)
    return done


def _adopt_entries(dirfd: int, uid: int, gid: int, done: HandOver) -> list[str]:
    """chown the entries of one directory; the names of its subdirectories."""
    subdirs: list[str] = []
    for name in _names(dirfd):
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(name)
            if (st.st_uid, st.st_gid) == (uid, gid):
                continue
            if not _ownable(st.st_mode):
                done.special.append(name)
                continue
            if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
                done.linked.append(name)
                continue
            os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
            done.changed += 1
        except FileNotFoundError:
            continue
    return subdirs


def _ownable(mode: int) -> bool:
    """Directories, files and symlinks. Never a socket, FIFO or device: giving the agent one
    would widen what it can reach (a host service's socket says who may connect by its owner)."""
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _names(dirfd: int) -> list[str]:
    with os.scandir(dirfd) as entries:
        return [entry.name for entry in entries]


def workspace_view(workspace: str) -> WorkspaceView | None:
    """The workspace directory's owner and mode as the host sees them."""
    try:
        st = os.stat(workspace)
    except OSError:
        return None
    return WorkspaceView(workspace, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


def scan_sockets(root: str, *, skip_uid: int | None, limit: int = MAX_SCAN_ENTRIES) -> SocketScan:
    """Unix sockets at or under `root` (never following a symlink), except those owned by
    `skip_uid` (the agent's own uid, when it is one only agents have); at most `limit` entries
    are looked at."""
    found: list[str] = []
    scanned = 0
    for path, mode, uid in _walk(root):
        scanned += 1
        if stat.S_ISSOCK(mode) and uid != skip_uid:
            found.append(path)
        if scanned >= limit:
            return SocketScan(tuple(found), scanned, complete=False)
    return SocketScan(tuple(found), scanned, complete=True)


def _walk(root: str) -> Iterator[tuple[str, int, int | None]]:
    """Every entry at or under `root`: path, file type bits, owner (None where the type alone
    tells it is no socket: regular files and symlinks are never stat'ed)."""
    try:
        top = os.lstat(root)
    except OSError:
        return
    yield root, top.st_mode, top.st_uid
    pending = [root] if stat.S_ISDIR(top.st_mode) else []
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            if entry.is_symlink() or entry.is_file(follow_symlinks=False):
                yield entry.path, stat.S_IFREG, None
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, st.st_mode, st.st_uid
            if stat.S_ISDIR(st.st_mode):
                pending.append(entry.path)
