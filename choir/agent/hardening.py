"""What choir-agent does to itself before it reads anything secret (issue: agent memory, setuid).

1. `PR_SET_DUMPABLE 0`: tool subprocesses run with the agent's uid, and a dumpable process's
   `/proc/<pid>/mem`, `environ` and `fd/` are open to every process of its uid — a `choir.exec`
   command could read the lease token and every secret out of the agent's memory. A non-dumpable
   process is open only to holders of CAP_SYS_PTRACE, which no tool has (containers and the bwrap
   sandbox drop every capability). It holds until an execve, which choir-agent never does; the
   programs it starts are dumpable again, which is fine: they hold no secret of the agent's.
2. Every capability dropped (effective, permitted, inheritable, ambient, and the bounding set):
   containers and bwrap start choir-agent without any, but the unsandboxed process runtime under
   a root choird would hand root's capabilities to every tool — CAP_SYS_PTRACE among them, which
   reads a non-dumpable process's memory all the same. choir-agent needs none.
3. `PR_SET_NO_NEW_PRIVS` and the setuid filter (`choir.core.security.nosuid_filter`): no process
   started
   from here can gain privileges by exec, and none can give a file the setuid or setgid bit,
   which another host user could otherwise run from the host's path of the workspace.

`harden()` is called first thing in `choir-agent` and in `git-cred-helper` (which holds a token
while it hands it to git; it needs only the first step: it runs under the agent's). Failures are
reported, not fatal: a kernel without seccomp should not stop an agent, and `agent verify` shows
what is missing.
"""

from __future__ import annotations

import ctypes
import os
from typing import Final

from choir.core.security.nosuid_filter import program

PR_SET_DUMPABLE: Final = 4
PR_CAPBSET_DROP: Final = 24
PR_SET_SECCOMP: Final = 22
PR_SET_NO_NEW_PRIVS: Final = 38
PR_CAP_AMBIENT: Final = 47
PR_CAP_AMBIENT_CLEAR_ALL: Final = 4
SECCOMP_MODE_FILTER: Final = 2
LINUX_CAPABILITY_VERSION_3: Final = 0x20080522
CAP_LAST_CAP_FILE: Final = "/proc/sys/kernel/cap_last_cap"


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def harden(*, full: bool = True) -> list[str]:
    """Make this process non-dumpable and, when `full`, drop every capability and load the
    setuid filter; the steps that failed, each as a short reason."""
    libc = ctypes.CDLL(None, use_errno=True)
    problems = []
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        problems.append(f"PR_SET_DUMPABLE: {_errno()}")
    if full:
        problems += _drop_capabilities(libc)
        problems += _load_filter(libc)
    return problems


def _drop_capabilities(libc: ctypes.CDLL) -> list[str]:
    """Bounding set first (that needs CAP_SETPCAP, which the capset then drops), then the rest."""
    try:
        with open(CAP_LAST_CAP_FILE) as file:
            last = int(file.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: none to drop then
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return [f"capset: {_errno()}"]
    return []


def _load_filter(libc: ctypes.CDLL) -> list[str]:
    machine = os.uname().machine  # what platform.machine() answers, without its import
    code = program(machine)
    if code is None:
        return [f"no setuid filter for {machine}"]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return [f"PR_SET_NO_NEW_PRIVS: {_errno()}"]
    prog = _SockFprog(len(code) // 8, code)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return [f"seccomp filter: {_errno()}"]
    return []


def _errno() -> str:
    return os.strerror(ctypes.get_errno())
