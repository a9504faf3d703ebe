"""`/proc/<pid>/mountinfo` as data (pure): which mount a path is, and its per-mount options.

Used to check from the kernel's side that an agent's workspace is mounted `nosuid,nodev` in its
container, and to find the bind mount choird itself put on a workspace.

    mount = mount_at(parse_mountinfo(text), "/workspace")
    mount is not None and {"nosuid", "nodev"} <= mount.options
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of mountinfo."""

    mount_id: int
    parent_id: int
    device: str
    """`major:minor` of the filesystem."""
    root: str
    """The directory of the filesystem mounted here (a bind mount's source within its fs)."""
    mount_point: str
    options: frozenset[str]
    """Per-mount options (`rw`, `nosuid`, `nodev`, `relatime`, …), not the superblock's."""
    fs_type: str


def parse_mountinfo(text: str) -> list[Mount]:
    """Every mount, in the kernel's order (a later mount at a path hides an earlier one)."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        tail = fields.index("-", 6)
        mounts.append(
            Mount(
                mount_id=int(fields[0]),
                parent_id=int(fields[1]),
                device=fields[2],
                root=_unescape(fields[3]),
                mount_point=_unescape(fields[4]),
                options=frozenset(fields[5].split(",")),
                fs_type=fields[tail + 1],
            )
        )
    return mounts


def mount_at(mounts: Sequence[Mount], path: str) -> Mount | None:
    """The mount visible at exactly `path` (the last one mounted there), or None."""
    found = [mount for mount in mounts if mount.mount_point == path]
    return found[-1] if found else None


def is_self_bind(mount: Mount, mounts: Sequence[Mount]) -> bool:
    """Whether `mount` is a directory bound onto itself: the same directory of the same
    filesystem its parent mount already shows at that place (what choird's nosuid bind of a
    workspace is)."""
    parent = next((m for m in mounts if m.mount_id == mount.parent_id), None)
    if parent is None or parent.device != mount.device:
        return False
    below = PurePosixPath(mount.mount_point).relative_to(PurePosixPath(parent.mount_point))
    return PurePosixPath(parent.root) / below == PurePosixPath(mount.root)


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (`\\040`)."""
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)
