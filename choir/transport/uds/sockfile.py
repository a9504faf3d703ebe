"""Claiming a Unix socket path: refuse a live server, replace a stale file, publish mode 0600.

The socket is bound under a private temporary name in the same directory, set to 0600, made to
listen, and only then renamed onto the final path. So nobody can ever connect to it with wider
permissions, and a client never finds a path that is bound but not yet listening. No `umask`
juggling: umask is process-wide and would race with other threads creating files.

The name a socket is bound under is what `/proc/net/unix` shows for it — and for every
connection accepted on it, which lives in the *client's* network namespace: a container would
read the host path of its socket there. So the socket is bound through its directory's file
descriptor (`/proc/self/fd/<fd>/.<random>.sock`), a name that says nothing about the host's
directories; it is the same file either way.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import stat
from pathlib import Path

from choir.errors import ConflictError, UsageError

MAX_SOCKET_PATH = 107
"""Longest path Linux accepts for a Unix socket (sun_path holds 108 bytes with the NUL)."""


def bind_private(path: Path, owner: str) -> tuple[socket.socket, Path]:
    """A socket bound (not listening) at a temporary 0600 name beside `path`, and that name."""
    claim(path, owner)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.parent / f".{secrets.token_hex(4)}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise UsageError(
            f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; use a shorter CHOIR_HOME"
        )
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except BaseException:  # out of descriptors: the directory's must not leak either
        os.close(directory)
        raise
    try:
        sock.bind(_anonymous_name(directory, temporary))
        os.chmod(temporary.name, 0o600, dir_fd=directory)
    except BaseException:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    finally:
        os.close(directory)
    return sock, temporary


def _anonymous_name(directory: int, temporary: Path) -> str:
    """`temporary` as a path through the open `directory` (no host directory in it), or as it
    is where /proc is not mounted."""
    through = f"/proc/self/fd/{directory}"
    return f"{through}/{temporary.name}" if os.path.isdir(through) else str(temporary)


def publish(temporary: Path, path: Path) -> int:
    """Move the listening socket onto its path; its inode, to remove only our own file later."""
    os.rename(temporary, path)
    return os.stat(path).st_ino


def unpublish(path: Path, inode: int) -> None:
    """Remove the socket file if it is still ours (a newer server may have replaced it)."""
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_ino == inode:
            path.unlink()


def claim(path: Path, owner: str) -> None:
    """Raise if a server answers at `path` or something else lives there; remove a stale socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConflictError(f"{path} exists and is not a socket; move it away and start again")
    if answers(path):
        raise ConflictError(f"{owner} is already running (socket {path} answers)")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def answers(path: Path, timeout: float = 1.0) -> bool:
    """Whether a server accepts connections at `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except TimeoutError:
            return True
        except PermissionError:
            raise ConflictError(
                f"cannot probe socket {path}: permission denied; it belongs to another user"
            ) from None
        return True
