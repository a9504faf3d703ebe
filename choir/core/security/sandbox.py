"""The process runtime's sandbox as data: bwrap's arguments, and the check of a running agent.

Pure. Without Docker, choird runs each choir-agent inside bubblewrap (`choir.daemon.runtimes.bwrap`
does the I/O): new user, PID, IPC, UTS, mount and cgroup namespaces; the network namespace is the
host's, since agents reach their LLM endpoint (§18.1 allows outbound web access). The filesystem is
an empty read-only root holding only what choir-agent needs — the OS's `/usr` (and its
`/bin`/`/lib` links), a short list of `/etc` files, the Python that runs choir, the agent's merged
tree at `/choir` read-only, its own socket's directory at its host path read-only (the only entry
of `$CHOIR_HOME` in there), for an agent that may propose repo changes its own repo read-only at
`/agent-repo` (`REPO_TARGET`, to clone from) — plus a private `/proc`, `/dev`, a tmpfs `/tmp`
holding HOME, and the workspace at `/workspace`, the one writable host path. Every mount is nosuid
and nodev, every capability is dropped, no_new_privs is set, the setuid filter (`nosuid_filter`) is
loaded, the agent gets a session of its own, and it cannot make user namespaces of its own.

The PID namespace is also what ends an agent's whole tree: bwrap's init is PID 1 in it, the agent
its only child; when the agent exits — or is killed — init exits, and the kernel kills every
process left in the namespace, however it detached. bwrap is *not* tied to choird's life
(no `--die-with-parent`): an agent outlives a choird restart.

`check_sandbox` reads back what the kernel says about the running agent (its `/proc` entries,
gathered by the daemon) and checks each item, for `agent verify` and at every start.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from choir.core.security.profile import REPO_TARGET, ProfileCheck

WORKSPACE_TARGET: Final = "/workspace"
TREE_TARGET: Final = "/choir"
HOME_TARGET: Final = "/tmp/home"
OWN_NAMESPACES: Final = ("user", "pid", "ipc", "uts", "mnt")
"""Namespaces the agent must not share with choird (cgroup too where the kernel allows)."""
SHARED_NAMESPACES: Final = ("net",)
WRITABLE: Final = (WORKSPACE_TARGET, "/tmp", "/dev", "/proc")
"""Mount points that may be writable: the workspace, the private tmpfs, and /dev and /proc
(and what is mounted under those two: bwrap's device nodes, devpts, /proc's own entries)."""
SYSTEM_LINKS: Final = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level paths that merged-/usr systems make symlinks into /usr."""
ETC_ENTRIES: Final = (
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "services",
    "protocols",
    "localtime",
    "timezone",
    "os-release",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "mime.types",
    "bash.bashrc",
    "profile",
    "inputrc",
    "ssh/ssh_config",
    "ssh/ssh_config.d",
)
"""The `/etc` entries an agent's tools need (names, DNS, TLS roots, the linker, shells, ssh's
client config); never shadow files, ssh host keys, sudoers or the host's git config."""


@dataclass(frozen=True)
class HostFiles:
    """What of the host goes into every sandbox, read-only; found once by the daemon."""

    ro_binds: tuple[tuple[str, str], ...]
    """(host source, path inside), e.g. `/usr`, the Python prefixes, `/etc/resolv.conf`."""
    symlinks: tuple[tuple[str, str], ...] = ()
    """(target, path inside), e.g. (`usr/bin`, `/bin`)."""


@dataclass(frozen=True)
class SandboxLayout:
    """One agent's sandbox: the host's files, and the agent's own paths on the host."""

    host: HostFiles
    workspace: str
    tree: str
    socket: str
    hostname: str
    repo: str | None = None
    """The agent's repo on the host, bound read-only at `REPO_TARGET` (None: not bound)."""


def bwrap_args(layout: SandboxLayout, *, seccomp_fd: int | None = None) -> list[str]:
    """bwrap's options (without the command) for `layout`; `seccomp_fd` holds the filter."""
    args = [
        *("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"),
        *("--unshare-cgroup-try", "--disable-userns", "--hostname", layout.hostname),
        *("--cap-drop", "ALL", "--new-session"),
        *("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"),
        *("--perms", "0700", "--dir", HOME_TARGET),
    ]
    for source, target in layout.host.ro_binds:
        args += ["--ro-bind", source, target]
    for target, path in layout.host.symlinks:
        args += ["--symlink", target, path]
    args += [
        *("--symlink", "/tmp", "/var/tmp"),
        *("--ro-bind", layout.tree, TREE_TARGET),
        *("--bind", layout.workspace, WORKSPACE_TARGET),
        *(("--ro-bind", layout.repo, REPO_TARGET) if layout.repo is not None else ()),
        # the socket's own directory, not the socket: a restarted choird's new socket appears
        *("--ro-bind", posixpath.dirname(layout.socket), posixpath.dirname(layout.socket)),
        *("--remount-ro", "/", "--chdir", WORKSPACE_TARGET),
    ]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args


@dataclass(frozen=True)
class Mount:
    """One line of /proc/<pid>/mountinfo: where, with which per-mount options."""

    point: str
    options: frozenset[str]
    fstype: str

    @property
    def writable(self) -> bool:
        return "ro" not in self.options


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 6:
            continue
        fstype = line.split(" - ", 1)[1].split()[0]
        point = fields[4].replace("\\040", " ")
        mounts.append(Mount(point, frozenset(fields[5].split(",")), fstype))
    return mounts


@dataclass(frozen=True)
class SandboxView:
    """What the kernel says about a running agent, as the daemon read it from /proc."""

    status: Mapping[str, str]
    """/proc/<pid>/status fields."""
    namespaces: Mapping[str, bool]
    """Namespace name -> True when the agent's differs from choird's (/proc/*/ns links)."""
    mounts: Sequence[Mount]
    workspace_is_bound: bool
    """/workspace in the agent's root is the host workspace (same device and inode)."""
    visible: Sequence[str] = field(default_factory=tuple)
    """Host paths that must be hidden but exist in the agent's root."""


def check_sandbox(view: SandboxView) -> tuple[ProfileCheck, ...]:
    """Every item of the sandbox, from the kernel's view of the agent."""
    return (
        _namespaces(view),
        _status_flag(view, "no_new_privileges", "NoNewPrivs", "1"),
        _capabilities(view),
        _status_flag(view, "setuid_filter", "Seccomp", "2"),
        _workspace(view),
        _writable(view),
        _nosuid(view),
        _hidden(view),
    )


def _namespaces(view: SandboxView) -> ProfileCheck:
    own = [name for name in OWN_NAMESPACES if view.namespaces.get(name)]
    shared = [name for name in (*OWN_NAMESPACES, *SHARED_NAMESPACES) if name not in own]
    actual = f"own {' '.join(own) or 'none'}; shared with choird {' '.join(shared) or 'none'}"
    want = f"own {' '.join(OWN_NAMESPACES)}; shared {' '.join(SHARED_NAMESPACES)} (LLM access)"
    return ProfileCheck("namespaces", own == list(OWN_NAMESPACES), want, actual)


def _status_flag(view: SandboxView, item: str, key: str, want: str) -> ProfileCheck:
    actual = view.status.get(key, "?")
    return ProfileCheck(item, actual == want, f"{key}={want}", f"{key}={actual}")


def _capabilities(view: SandboxView) -> ProfileCheck:
    keys = ("CapEff", "CapPrm", "CapBnd")
    values = {key: view.status.get(key, "?") for key in keys}
    ok = all(_zero(value) for value in values.values())
    actual = " ".join(f"{key}={value}" for key, value in values.items())
    return ProfileCheck("capabilities_dropped", ok, "CapEff, CapPrm, CapBnd all 0", actual)


def _workspace(view: SandboxView) -> ProfileCheck:
    found = [m for m in view.mounts if m.point == WORKSPACE_TARGET]
    ok = view.workspace_is_bound and len(found) == 1 and found[0].writable
    actual = "bound, writable" if ok else ("missing" if not found else "not the workspace, or ro")
    return ProfileCheck("workspace_bind", ok, f"the workspace at {WORKSPACE_TARGET}, rw", actual)


def _writable(view: SandboxView) -> ProfileCheck:
    extra = sorted(m.point for m in view.mounts if m.writable and not _may_write(m.point))
    want = f"only {', '.join(WRITABLE)}"
    return ProfileCheck("writable_paths", not extra, want, ", ".join(extra) or want)


def _may_write(point: str) -> bool:
    if point in (WORKSPACE_TARGET, "/tmp"):
        return True
    return any(point == kernel or point.startswith(kernel + "/") for kernel in ("/dev", "/proc"))


def _nosuid(view: SandboxView) -> ProfileCheck:
    missing = sorted(m.point for m in view.mounts if "nosuid" not in m.options)
    return ProfileCheck(
        "nosuid_mounts", not missing, "every mount nosuid", ", ".join(missing) or "all nosuid"
    )


def _hidden(view: SandboxView) -> ProfileCheck:
    want = "no $CHOIR_HOME entry but the agent's socket, no host home"
    return ProfileCheck(
        "host_paths_hidden", not view.visible, want, ", ".join(view.visible) or want
    )


def _zero(hex_mask: str) -> bool:
    try:
        return int(hex_mask, 16) == 0
    except ValueError:
        return False
