"""The workspace as a confined filesystem: every tool path is resolved beneath one root fd.

Paths are race-free by construction: nothing is checked and then opened by name. The root is held
as an `O_PATH` directory fd and every open walks down from it, so renaming or swapping the
workspace's directories mid-call can never lead an open outside it.

Path rules (what a tool may name):
- Paths are relative to the workspace. `/workspace` and `/workspace/...` are accepted as an alias
  for the root, because that is where the container mounts it (§15.1) and models write it; every
  other absolute path is refused.
- `.` and `..` are resolved lexically first (`a/../b` is `b`); a `..` that climbs above the root is
  refused.
- Lock keys (`file:<path>`) use `locate`: the path with inside symlinks followed as far as the
  tree exists, the missing rest as written — so a symlink and its target share one lock.
- Relative symlinks inside the workspace are followed as long as every step stays inside.
  Absolute symlinks, symlinks leading outside, loops and NUL bytes are refused.

The kernel enforces this with openat2(2) `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` where available;
elsewhere a component-wise walk (`_Walk`) opens one name at a time with `O_NOFOLLOW` and expands
symlinks itself, holding an fd for every directory so `..` never goes through the filesystem.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections import deque
from pathlib import Path

from choir.errors import ChoirError, ExitCode

CONTAINER_ROOT = "/workspace"
"""The mount point of the workspace in the container, accepted as an alias of the root."""
CHOIRTMP = ".choirtmp"
"""Gateway staging area (§15.1); `send/` goes to the user, `recv/` holds uploads."""
MAX_SYMLINKS = 40
"""Symlink expansions allowed in one path, as Linux allows (more is treated as a loop)."""


class PathOutsideWorkspace(ChoirError):
    """A tool named a path that does not resolve inside the workspace.

    The message repeats the path exactly as the model gave it and never a host path.
    """

    error_code = "path_outside_workspace"

    def __init__(self, path: str) -> None:
        super().__init__(f"path outside workspace: {path}", exit_code=ExitCode.USAGE)
        self.path = path


def normalize(path: str) -> str:
    """The canonical workspace-relative form of `path` (`.` for the root), without touching disk.

    Raises `PathOutsideWorkspace` for NUL bytes, absolute paths other than the `/workspace` alias,
    and `..` escapes.
    """
    if "\0" in path:
        raise PathOutsideWorkspace(path)
    rel = path
    if rel == CONTAINER_ROOT or rel.startswith(CONTAINER_ROOT + "/"):
        rel = rel[len(CONTAINER_ROOT) :]
    elif rel.startswith("/"):
        raise PathOutsideWorkspace(path)
    parts: list[str] = []
    for part in rel.split("/"):
        if part == "..":
            if not parts:
                raise PathOutsideWorkspace(path)
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts) or "."


class Workspace:
    """The workspace root, open as a directory fd, and confined ways to open paths under it."""

    def __init__(self, root: str | os.PathLike[str], *, use_openat2: bool | None = None) -> None:
        self.root = Path(root)
        """Host path of the root: only for a subprocess cwd, never shown to the model."""
        self.root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY)
        if use_openat2 is None:
            use_openat2 = openat2_supported(self.root_fd)
        self.uses_openat2 = use_openat2
        """True when the kernel confines opens (openat2); False when `_Walk` does."""

    def close(self) -> None:
        os.close(self.root_fd)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def open_file(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
        """Open `path` (following inside symlinks) and return the fd; the caller closes it."""
        rel = normalize(path)
        if self.uses_openat2:
            return self._openat2(path, rel, flags, mode)
        with _Walk(self.root_fd, path) as walk:
            name = walk.descend(rel, create=False)
            return walk.open_final(name, flags, mode)

    def open_dir(self, path: str = ".", *, create: bool = False) -> int:
        """A readable fd of directory `path`; with `create`, missing directories are made."""
        if create:
            with _Walk(self.root_fd, path) as walk:
                walk.descend(normalize(path) + "/.", create=True)  # "/.": enter the last name too
                return walk.open_final(None, os.O_RDONLY | os.O_DIRECTORY, 0)
        return self.open_file(path, os.O_RDONLY | os.O_DIRECTORY)

    def open_parent(self, path: str, *, create: bool = False) -> tuple[int, str]:
        """(readable fd of the directory holding `path`, final name) with symlinks resolved.

        For writers that replace the entry atomically (temp file + rename in that directory): the
        name is a plain entry of the returned directory, never a symlink at the time of resolving.
        """
        rel = normalize(path)
        with _Walk(self.root_fd, path) as walk:
            name = walk.descend(rel, create=create)
            if name is None:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            return walk.open_final(None, os.O_RDONLY | os.O_DIRECTORY, 0), name

    def resolve(self, path: str) -> str:
        """The canonical relative path that `path` names once inside symlinks are followed."""
        with _Walk(self.root_fd, path) as walk:
            name = walk.descend(normalize(path), create=False)
            return "/".join([*walk.names, *([name] if name else [])]) or "."

    def locate(self, path: str) -> str:
        """Where `path` really is: its canonical relative path with inside symlinks followed as
        far as the tree exists (a dangling one too), and what does not exist yet as written.

        Lock keys use it, so every name of one file (a symlink, its target) gets one key, and a
        file that does not exist yet gets the key it will have. Raises `PathOutsideWorkspace`
        for escapes, as every open does.
        """
        rel = normalize(path)
        if _without_symlinks(self.root_fd, rel):
            return rel
        with _Walk(self.root_fd, path) as walk:
            rest = walk.locate(rel)
            return "/".join([*walk.names, *rest]) or "."

    def stat(self, path: str) -> os.stat_result:
        fd = self.open_file(path, os.O_PATH)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def read_bytes(self, path: str) -> bytes:
        fd = self.open_file(path)
        with open(fd, "rb") as file:
            return file.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode()

    def ensure_choirtmp(self) -> None:
        """Create `.choirtmp/send` and `.choirtmp/recv` (§15.1) if they are missing."""
        for sub in ("send", "recv"):
            os.close(self.open_dir(f"{CHOIRTMP}/{sub}", create=True))

    def _openat2(self, given: str, rel: str, flags: int, mode: int) -> int:
        try:
            return _open_beneath(self.root_fd, rel, flags, mode if flags & os.O_CREAT else 0)
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.ELOOP):
                raise PathOutsideWorkspace(given) from None
            raise


class _Walk:
    """Resolve a path one component at a time beneath a root fd (the fallback for openat2).

    Each step opens a single name with `O_NOFOLLOW` relative to the directory fd above it; a
    symlink is read with readlinkat and its target pushed onto the remaining components. `..`
    pops the stack of held directory fds, so it can never climb out of the root.
    """

    def __init__(self, root_fd: int, given: str) -> None:
        self.root_fd = root_fd
        self.given = given
        self.names: list[str] = []
        self.fds: list[int] = []
        self.links_left = MAX_SYMLINKS

    def __enter__(self) -> _Walk:
        return self

    def __exit__(self, *_: object) -> None:
        for fd in self.fds:
            os.close(fd)

    @property
    def cwd(self) -> int:
        return self.fds[-1] if self.fds else self.root_fd

    def descend(self, rel: str, *, create: bool) -> str | None:
        """Walk to the directory holding the last component; return that name (None for a dir)."""
        pending = deque(rel.split("/"))
        while pending:
            name = pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
            elif not pending:
                target = self._readlink(name)
                if target is None:
                    return name
                self._expand(target, pending)
            else:
                self._enter(name, pending, create=create)
        return None

    def locate(self, rel: str) -> list[str]:
        """Walk `rel` following symlinks until a name does not exist (or is no directory);
        return the components not walked, `..` applied to them lexically."""
        pending = deque(rel.split("/"))
        while pending:
            name = pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
                continue
            target = self._readlink(name)
            if target is not None:
                self._expand(target, pending)
            elif not pending or not self._try_enter(name):
                return self._lexical([name, *pending])
        return []

    def _try_enter(self, name: str) -> bool:
        try:
            fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.cwd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        self.fds.append(fd)
        self.names.append(name)
        return True

    def _lexical(self, rest: list[str]) -> list[str]:
        """`rest` with `.` dropped and `..` undone lexically (it names nothing that exists)."""
        kept: list[str] = []
        for name in rest:
            if name == "..":
                if kept:
                    kept.pop()
                else:
                    self._up()
            elif name not in ("", "."):
                kept.append(name)
        return kept

    def open_final(self, name: str | None, flags: int, mode: int) -> int:
        try:
            return os.open(name or ".", flags | os.O_NOFOLLOW, mode, dir_fd=self.cwd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a symlink after we looked: refuse the race
                raise PathOutsideWorkspace(self.given) from None
            raise

    def _enter(self, name: str, pending: deque[str], *, create: bool) -> None:
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            fd = os.open(name, flags, dir_fd=self.cwd)
        except FileNotFoundError:
            if not create:
                raise
            os.mkdir(name, dir_fd=self.cwd)
            fd = os.open(name, flags, dir_fd=self.cwd)
        except NotADirectoryError:
            target = self._readlink(name)
            if target is None:
                raise
            self._expand(target, pending)
            return
        self.fds.append(fd)
        self.names.append(name)

    def _up(self) -> None:
        if not self.fds:
            raise PathOutsideWorkspace(self.given)
        os.close(self.fds.pop())
        self.names.pop()

    def _readlink(self, name: str) -> str | None:
        """The target if `name` is a symlink in the current directory, else None."""
        try:
            return os.readlink(name, dir_fd=self.cwd)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
                return None
            raise

    def _expand(self, target: str, pending: deque[str]) -> None:
        self.links_left -= 1
        if self.links_left < 0 or target.startswith("/") or "\0" in target:
            raise PathOutsideWorkspace(self.given)
        pending.extendleft(reversed(target.split("/")))


_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long
_EAGAIN_RETRIES = 8
"""openat2 returns EAGAIN when a rename races a `..` lookup; the caller is meant to retry."""


class _OpenHow(ctypes.Structure):
    """`struct open_how` of openat2(2)."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _without_symlinks(root_fd: int, rel: str) -> bool:
    """True when no existing component of normalized `rel` is a symlink, so its lexical form is
    where it is: the cheap common case of `locate`, one lstat per component and no open (an
    lstat, not a readlink: a component that is no symlink then raises nothing, and raising
    was most of what keying a call's path cost). Only a key is computed here (every open is
    confined on its own), so a component swapped for a symlink between two lstats costs a
    stale key, never an escape."""
    if rel == ".":
        return True
    prefix = ""
    for name in rel.split("/"):
        prefix = f"{prefix}/{name}" if prefix else name
        try:
            mode = os.stat(prefix, dir_fd=root_fd, follow_symlinks=False).st_mode
        except OSError as exc:
            return exc.errno in (errno.ENOENT, errno.ENOTDIR)  # the rest does not exist
        if stat.S_ISLNK(mode):
            return False
    return True


def openat2_supported(dir_fd: int) -> bool:
    """True when openat2 works here (Linux >= 5.6, and not blocked by a seccomp profile)."""
    if _SYS_OPENAT2 is None:
        return False
    try:
        os.close(_open_beneath(dir_fd, ".", os.O_PATH, 0))
    except OSError:
        return False
    return True


def _open_beneath(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    if _SYS_OPENAT2 is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    how = _OpenHow(flags | os.O_CLOEXEC, mode, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    args = (ctypes.c_int(dir_fd), os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))
    for _ in range(_EAGAIN_RETRIES):
        fd = int(_LIBC.syscall(ctypes.c_long(_SYS_OPENAT2), *args))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            break
    raise OSError(err, os.strerror(err))
