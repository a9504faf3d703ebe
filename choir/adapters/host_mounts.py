"""Bind mounts on the host through mount(2): a workspace made `nosuid,nodev` in place.

Docker's API has no way to ask for a `nosuid` bind (its bind options are only propagation and
`ro`; a `local` volume with `o=bind,nosuid` silently drops the flags, since the kernel ignores
them on the first bind). A bind mount copies the flags of the mount it is made from, though —
so choird (as root) binds the workspace onto itself and remounts that bind `nosuid,nodev`
(keeping whatever else it had: `ro`, `noexec`, atime flags), then docker binds it into the
container with the same flags. While the agent runs, its workspace is `nosuid,nodev` on the
host too. `unmount` takes only the very mount `bind_nosuid` made away.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Final

from choir.core.security.mountinfo import is_self_bind, mount_at, parse_mountinfo
from choir.errors import ChoirError

MS_RDONLY: Final = 0x1
MS_NOSUID: Final = 0x2
MS_NODEV: Final = 0x4
MS_NOEXEC: Final = 0x8
MS_REMOUNT: Final = 0x20
MS_NOATIME: Final = 0x400
MS_NODIRATIME: Final = 0x800
MS_BIND: Final = 0x1000
MS_RELATIME: Final = 0x200000
MNT_DETACH: Final = 0x2
KEPT_FLAGS: Final = (
    (os.ST_RDONLY, MS_RDONLY),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
"""statvfs flags a remount must repeat, or it would clear them (widening the mount)."""

_libc = ctypes.CDLL(None, use_errno=True)


def is_nosuid_nodev(path: Path) -> bool:
    """Whether the mount `path` is on already has both flags."""
    flags = os.statvfs(path).f_flag
    return bool(flags & os.ST_NOSUID) and bool(flags & os.ST_NODEV)


def bind_nosuid(path: Path) -> int:
    """Bind `path` onto itself `nosuid,nodev`; the new mount's id (for `unmount`)."""
    flags = os.statvfs(path).f_flag
    kept = sum(ms for st, ms in KEPT_FLAGS if flags & st)
    _mount(path, path, MS_BIND)
    try:
        _mount(None, path, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | kept)
        mount = mount_at(parse_mountinfo(_own_mountinfo()), str(path))
        if mount is None:
            raise ChoirError(f"the bind mount on {path} is not in /proc/self/mountinfo")
    except BaseException:
        _umount(path)
        raise
    return mount.mount_id


def unmount(path: Path, mount_id: int) -> bool:
    """Unmount the mount `mount_id` at `path` if it is still the one there; whether it was."""
    mount = mount_at(parse_mountinfo(_own_mountinfo()), str(path))
    if mount is None or mount.mount_id != mount_id:
        return False
    _umount(path)
    return True


def unmount_leftover(path: Path) -> bool:
    """Unmount a `nosuid,nodev` self-bind at `path` — one a choird that died left; whether
    there was one."""
    mounts = parse_mountinfo(_own_mountinfo())
    mount = mount_at(mounts, str(path))
    if mount is None or not {"nosuid", "nodev"} <= mount.options:
        return False
    if not is_self_bind(mount, mounts):
        return False
    _umount(path)
    return True


def _own_mountinfo() -> str:
    return Path("/proc/self/mountinfo").read_text()


def _mount(source: Path | None, target: Path, flags: int) -> None:
    raw_source = os.fsencode(source) if source is not None else None
    if _libc.mount(raw_source, os.fsencode(target), None, ctypes.c_ulong(flags), None) != 0:
        errno = ctypes.get_errno()
        raise ChoirError(f"cannot mount {target} nosuid,nodev: {os.strerror(errno)}")


def _umount(target: Path) -> None:
    if _libc.umount2(os.fsencode(target), MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        raise ChoirError(f"cannot unmount {target}: {os.strerror(errno)}")
