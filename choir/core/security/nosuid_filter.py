"""A seccomp filter that refuses setuid and setgid bits on files (pure: the program as bytes).

Why: an agent's `choir.exec` runs as choird's uid (root when choird is root) and writes to a
workspace that is a directory on the host. `nosuid` on a mount only protects *that* mount: a
setuid copy of bash made in the workspace is still setuid when another host user runs it from the
host path, and gives them choird's uid — root, or the operator. Directory modes are the first
defence, but the agent owns its workspace and can open it back up with chmod. So choir-agent
(every runtime) and bwrap (`--seccomp`) load this filter, which nothing started under it can
remove: `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `mknod`, `mknodat`, `creat`, and `open` /
`openat` with O_CREAT or O_TMPFILE fail with EPERM when the mode has S_ISUID or S_ISGID.
`openat2` (its mode is behind a pointer a filter cannot read) and `io_uring_setup` (io_uring
opens files without a system call) fail with ENOSYS, which callers treat as "use openat".

Only the native ABI is allowed through: any other architecture (i386 on x86_64, arm32 on
aarch64) and the x32 ABI get EPERM for every call, so none of them is a way around the checks.
`program(arch)` returns the classic-BPF program (`struct sock_filter[]`), what
`prctl(PR_SET_SECCOMP)` and `bwrap --seccomp` take; None for an architecture it does not know.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass
from typing import Final

SET_ID_BITS: Final = 0o6000
"""S_ISUID | S_ISGID."""
CREATES: Final = 0o100 | 0o20000000
"""O_CREAT | __O_TMPFILE (the same on x86_64 and aarch64): the open flags that use the mode."""
X32_BIT: Final = 0x40000000

RET_ALLOW: Final = 0x7FFF0000
RET_ERRNO: Final = 0x00050000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR, _ARCH = 0, 4


def _arg(index: int) -> int:
    """Offset of the low 32 bits of args[index] (little endian; modes and flags fit in 32)."""
    return 16 + 8 * index


# BPF opcodes
_LD_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET: Final = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET: Final = 0x06  # BPF_RET | BPF_K


@dataclass(frozen=True)
class ModeCall:
    """A system call whose argument `mode` is a file mode; `flags`, when set, must have
    O_CREAT or O_TMPFILE for the mode to be used."""

    nr: int
    mode: int
    flags: int | None = None


@dataclass(frozen=True)
class Arch:
    audit: int
    """AUDIT_ARCH_* as the kernel reports it in seccomp_data.arch."""
    mode_calls: dict[str, ModeCall]
    refused: dict[str, int]
    """Calls answered ENOSYS whatever their arguments."""
    x32: bool = False


ARCHES: Final = {
    "x86_64": Arch(
        audit=0xC000003E,
        mode_calls={
            "chmod": ModeCall(90, mode=1),
            "fchmod": ModeCall(91, mode=1),
            "fchmodat": ModeCall(268, mode=2),
            "fchmodat2": ModeCall(452, mode=2),
            "creat": ModeCall(85, mode=1),
            "mknod": ModeCall(133, mode=1),
            "mknodat": ModeCall(259, mode=2),
            "open": ModeCall(2, mode=2, flags=1),
            "openat": ModeCall(257, mode=3, flags=2),
        },
        refused={"openat2": 437, "io_uring_setup": 425},
        x32=True,
    ),
    "aarch64": Arch(
        audit=0xC00000B7,
        mode_calls={
            "fchmod": ModeCall(52, mode=1),
            "fchmodat": ModeCall(53, mode=2),
            "fchmodat2": ModeCall(452, mode=2),
            "mknodat": ModeCall(33, mode=2),
            "openat": ModeCall(56, mode=3, flags=2),
        },
        refused={"openat2": 437, "io_uring_setup": 425},
    ),
}


class _Program:
    """A tiny assembler: instructions whose jump targets are labels, resolved at the end."""

    def __init__(self) -> None:
        self._code: list[tuple[int, str | int, str | int, int]] = []
        self._labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self._code.append((code, jt, jf, k))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self._code):
            out += struct.pack("=HBBI", code, self._jump(index, jt), self._jump(index, jf), k)
        return bytes(out)

    def _jump(self, index: int, target: str | int) -> int:
        if isinstance(target, int):
            return target
        offset = self._labels[target] - index - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"jump to {target} out of range")
        return offset


def program(machine: str) -> bytes | None:
    """The filter for `machine` (`platform.machine()`), or None when it is not supported."""
    arch = ARCHES.get(machine)
    if arch is None:
        return None
    p = _Program()
    p.op(_LD_ABS, _ARCH)
    p.op(_JEQ, arch.audit, 0, "deny")
    p.op(_LD_ABS, _NR)
    if arch.x32:
        p.op(_JGE, X32_BIT, "deny", 0)
    for name, call in arch.mode_calls.items():
        p.op(_JEQ, call.nr, name, 0)
    for nr in arch.refused.values():
        p.op(_JEQ, nr, "enosys", 0)
    p.op(_RET, RET_ALLOW)
    for name, call in arch.mode_calls.items():
        p.label(name)
        if call.flags is not None:
            p.op(_LD_ABS, _arg(call.flags))
            p.op(_JSET, CREATES, 0, "allow")
        p.op(_LD_ABS, _arg(call.mode))
        p.op(_JSET, SET_ID_BITS, "deny", "allow")
    p.label("enosys")
    p.op(_RET, RET_ERRNO | errno.ENOSYS)
    p.label("deny")
    p.op(_RET, RET_ERRNO | errno.EPERM)
    p.label("allow")
    p.op(_RET, RET_ALLOW)
    return p.assemble()
