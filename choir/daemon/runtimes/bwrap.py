"""bubblewrap on this host: whether it can sandbox agents, what goes in, what the kernel says.

`find_sandbox` decides once per choird: `$CHOIR_BWRAP` names the bwrap binary (empty: no sandbox,
e.g. to debug an agent with host tools), else `bwrap` on PATH; a dry run then checks that it can
make the namespaces here (user namespaces may be disabled, or forbidden inside a container). If
anything is missing, the process runtime runs agents unsandboxed and says why. The pure parts —
the arguments and the checks — are `choir.core.security.sandbox`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import choir
from choir.core.security.nosuid_filter import program
from choir.core.security.profile import parse_proc_status
from choir.core.security.sandbox import (
    ETC_ENTRIES,
    OWN_NAMESPACES,
    SHARED_NAMESPACES,
    SYSTEM_LINKS,
    WORKSPACE_TARGET,
    HostFiles,
    SandboxView,
    parse_mountinfo,
)

BWRAP_ENV: Final = "CHOIR_BWRAP"
PROBE_TIMEOUT_S: Final = 10.0
MAX_HIDDEN_CHECKED: Final = 200
"""Host entries checked for visibility per verify (a huge home need not be walked whole)."""


@dataclass(frozen=True)
class Sandbox:
    """A bwrap that works here, the host files every agent gets, and the setuid filter."""

    bwrap: str
    host: HostFiles
    seccomp: bytes
    setsid: str
    """util-linux `setsid`, which makes choir-agent lead its own process group in the sandbox
    (bwrap's `--new-session` makes its init the leader): a signal to the agent's group — how
    choird ends agents a previous choird left — must reach it."""


SandboxFound = tuple[Sandbox | None, str]
"""The sandbox and bwrap's path, or None and why agents will run unsandboxed."""


def find_sandbox() -> SandboxFound:
    """The sandbox and bwrap's path, or None and why agents will run unsandboxed. Blocking:
    the probe runs bwrap (5-20 ms)."""
    setting = os.environ.get(BWRAP_ENV)
    if setting == "":
        return None, f"{BWRAP_ENV} is empty, which turns the sandbox off"
    bwrap = setting or shutil.which("bwrap")
    if not bwrap:
        return None, "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    seccomp = program(platform.machine())
    if seccomp is None:
        return None, f"choir has no setuid filter for {platform.machine()}"
    setsid = shutil.which("setsid", path="/usr/bin:/bin")
    if setsid is None:
        return None, "setsid is not installed (Debian/Ubuntu: util-linux)"
    problem = probe(bwrap)
    if problem is not None:
        return None, problem
    return Sandbox(bwrap, host_files(), seccomp, setsid), bwrap


def probe(bwrap: str) -> str | None:
    """None when `bwrap` can make an agent's namespaces here, else what went wrong."""
    true = shutil.which("true") or "/bin/true"
    command = [
        *(bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"),
        *("--disable-userns", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc"),
        *("--", true),
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{bwrap} cannot run: {error}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return f"{bwrap} cannot make namespaces here: {said[-1] if said else done.returncode}"


def host_files() -> HostFiles:
    """/usr and its links, the listed /etc entries, and the Python that runs choir."""
    binds = [("/usr", "/usr")]
    links = []
    for path in SYSTEM_LINKS:
        if os.path.islink(path):
            links.append((os.readlink(path), path))
        elif os.path.isdir(path):
            binds.append((path, path))
    etc = [f"/etc/{entry}" for entry in ETC_ENTRIES] + sorted(glob.glob("/etc/python3*"))
    binds += [(os.path.realpath(path), path) for path in etc if os.path.exists(path)]
    binds += [(os.path.realpath(path), path) for path in python_paths()]
    return HostFiles(tuple(binds), tuple(links))


def python_paths() -> list[str]:
    """Directories outside /usr that the Python running choir needs: its prefixes, its
    site-packages and choir's own package (an editable install's is the source tree)."""
    found = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        str(Path(choir.__file__).parent),
        *(path for path in sys.path if Path(path).name in ("site-packages", "dist-packages")),
    }
    kept: list[str] = []
    for path in sorted(os.path.abspath(p) for p in found if os.path.isdir(p)):
        if not any(_within(path, outer) for outer in ("/usr", *kept)):
            kept.append(path)
    return kept


def _within(path: str, outer: str) -> bool:
    return path == outer or path.startswith(outer.rstrip("/") + "/")


def read_view(pid: int, workspace: Path, hidden: Iterable[str]) -> SandboxView:
    """The kernel's view of sandboxed process `pid` (OSError when it is gone)."""
    proc = Path(f"/proc/{pid}")
    namespaces = {
        name: os.readlink(proc / "ns" / name) != os.readlink(f"/proc/self/ns/{name}")
        for name in (*OWN_NAMESPACES, *SHARED_NAMESPACES)
    }
    inside = os.stat(proc / "root" / WORKSPACE_TARGET.lstrip("/"))
    outside = os.stat(workspace)
    return SandboxView(
        status=parse_proc_status((proc / "status").read_text()),
        namespaces=namespaces,
        mounts=parse_mountinfo((proc / "mountinfo").read_text()),
        workspace_is_bound=(inside.st_dev, inside.st_ino) == (outside.st_dev, outside.st_ino),
        visible=[path for path in hidden if os.path.lexists(f"{proc}/root{path}")],
    )


def must_be_hidden(choir_home: Path, socket: Path, bound: Iterable[str]) -> list[str]:
    """Host paths the agent must not see: every entry of `$CHOIR_HOME` and of choird's home
    directory, except the directories that lead to what is bound in (its socket, Python)."""
    leads_in = [str(socket), *bound]
    found: list[str] = []
    for directory in [*_ancestors_inclusive(socket.parent, choir_home), Path.home()]:
        with contextlib.suppress(OSError):
            for entry in sorted(os.listdir(directory))[:MAX_HIDDEN_CHECKED]:
                path = str(directory / entry)
                if not any(_within(target, path) for target in leads_in):
                    found.append(path)
    return found


def _ancestors_inclusive(path: Path, top: Path) -> list[Path]:
    """`top` and each directory from it down to `path` (just `top` if `path` is elsewhere)."""
    if not _within(str(path), str(top)):
        return [top]
    chain = [path]
    while chain[-1] != top:
        chain.append(chain[-1].parent)
    return chain[::-1]
