"""choird's hands in an agent's `.choirtmp/` (§15.1, §19.5): store, list, read, remove.

The agent owns its workspace and may put anything there — a symlink in place of
`.choirtmp/send` pointing at the host's `/etc`, a FIFO named like a photo. So every step here
is taken from an open directory descriptor with `O_NOFOLLOW`: `.choirtmp` and its `send`/
`recv` are opened one component at a time, never through a link; only regular files are read
(opened non-blocking, checked with `fstat`); a file is stored under a temporary hidden name
and then hard-linked to its final name (which fails rather than replacing a file), so the
agent never sees half of it and nothing is overwritten. Blocking: callers run these in a
thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import signal
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from choir.daemon.gateway.telegram.files import outgoing_name

HEAD_BYTES = 64
"""How much of a file `send_method` looks at."""


@dataclass(frozen=True)
class Stamp:
    """What a file is at one moment: the same stamp twice, the same file unchanged."""

    inode: int
    size: int
    mtime_ns: int


class Changed(Exception):
    """The file is no longer the one that was stamped (or no longer a regular file)."""


@contextlib.contextmanager
def scratch(workspace: Path, sub: str, *, create: bool = False) -> Iterator[int]:
    """An open descriptor of `workspace/.choirtmp/<sub>`, reached without following a link."""
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in (".choirtmp", sub):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def store(workspace: Path, name: str, data: bytes) -> bool:
    """Put `data` in `.choirtmp/recv/<name>`; False when a file of that name is there already
    (stored by an earlier handling of the same update: kept, never overwritten)."""
    with scratch(workspace, "recv", create=True) as fd:
        if _exists(name, fd):
            return False
        tmp = f".choir-recv-{secrets.token_hex(6)}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(tmp, flags, 0o644, dir_fd=fd)
        try:
            _hand_over(out, fd)
            with os.fdopen(out, "wb", closefd=False) as stream:
                stream.write(data)
                stream.flush()
                os.fsync(out)
            os.close(out)
            out = -1
            try:
                os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                return False
            return True
        finally:
            if out >= 0:
                os.close(out)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)


def outgoing(workspace: Path) -> dict[str, Stamp]:
    """The finished regular files in `.choirtmp/send/` (links, directories, hidden and
    `.part` names left out); empty when the directory is missing or not a directory."""
    try:
        with scratch(workspace, "send") as fd:
            found: dict[str, Stamp] = {}
            for entry in os.scandir(fd):
                if outgoing_name(entry.name) and entry.is_file(follow_symlinks=False):
                    found[entry.name] = _stamp(entry.stat(follow_symlinks=False))
            return found
    except OSError:  # missing, or a link or file where a directory should be
        return {}


def being_written(workspace: Path, name: str) -> bool:
    """Whether some process (the agent, in its container or not) holds the file open for
    writing: a read lease is refused then. Where leases are not allowed (a file of another
    user without CAP_LEASE), False: the caller's wait for a steady stamp decides alone."""
    with scratch(workspace, "send") as dir_fd:
        fd = _open_regular(name, dir_fd)
        try:
            take_lease(fd)
        except BlockingIOError:
            return True
        except OSError:
            return False
        else:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            return False
        finally:
            os.close(fd)


def take_lease(fd: int) -> None:
    """A read lease on `fd` (BlockingIOError while the file is open for writing). Should a
    writer open the file in the instant before it is released, the kernel signals the holder:
    SIGIO by default, which ends a process that does not handle it — so the signal is set to
    SIGURG, ignored by default."""
    fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)


def read(workspace: Path, name: str, stamp: Stamp) -> bytes:
    """The content of `.choirtmp/send/<name>` if it is still `stamp` (else `Changed`)."""
    with scratch(workspace, "send") as dir_fd:
        fd = _open_regular(name, dir_fd)
        try:
            if _stamp(os.fstat(fd)) != stamp:
                raise Changed(name)
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = stream.read(stamp.size + 1)
        finally:
            os.close(fd)
    if len(data) != stamp.size:
        raise Changed(name)
    return data


def head(workspace: Path, name: str) -> bytes:
    with scratch(workspace, "send") as dir_fd:
        fd = _open_regular(name, dir_fd)
        try:
            return os.read(fd, HEAD_BYTES)
        finally:
            os.close(fd)


def remove(workspace: Path, name: str, stamp: Stamp) -> bool:
    """Delete `.choirtmp/send/<name>` if it is still `stamp` (a file the agent wrote again
    meanwhile stays, to be sent in turn); whether it was deleted."""
    with scratch(workspace, "send") as fd:
        try:
            now = _stamp(os.stat(name, dir_fd=fd, follow_symlinks=False))
        except FileNotFoundError:
            return False
        if now != stamp:
            return False
        os.unlink(name, dir_fd=fd)
        return True


def _hand_over(file_fd: int, dir_fd: int) -> None:
    """A root choird gives the file to the folder's owner (the agent's uid, which the Docker
    runtime hands the workspace to), so the agent can move or change what it received."""
    owner = os.fstat(dir_fd)
    if os.geteuid() == 0 and owner.st_uid != 0:
        os.fchown(file_fd, owner.st_uid, owner.st_gid)


def _open_regular(name: str, dir_fd: int) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Changed(name)
    return fd


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _stamp(st: os.stat_result) -> Stamp:
    return Stamp(st.st_ino, st.st_size, st.st_mtime_ns)
