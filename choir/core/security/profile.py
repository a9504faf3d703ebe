"""The container security profile (§15.3) as data, and the check of a container against it.

Pure. The docker runtime creates every agent container from `create_options(profile, …)`, and
`agent verify` reads the container back (`docker inspect`, plus the kernel's view of its main
process when choird can see it) and runs `check_container` — so what is enforced and what is
verified are one declaration, and an engine that silently drops a setting is caught.

Items, in §15.3's order: capabilities dropped, no-new-privileges, read-only root filesystem,
tmpfs /tmp and /run, CPU/memory/pids limits, the default seccomp profile; never privileged, no
Docker socket, no host PID/network/IPC namespace, no devices; the only mounts are the workspace
at /workspace and the agent's own socket directory at /run/choir (the socket is
/run/choir/choir.sock). Beyond §15.3: the container never runs
as uid 0 (`user_not_root`, the kernel's word when choird can see it) and its workspace is
mounted `nosuid,nodev` (`workspace_nosuid_nodev`, from the container's own mountinfo). Networking
is a bridge: agents reach their LLM endpoint (§18.1 allows outbound web access in v1), never the
host's network namespace; what they may not reach is checked from the host's side
(`security_host`).

An item can be advisory (`required=False`): it fails, saying why, without failing the report —
for a guarantee choird cannot give where it runs (a non-root choird cannot mount or install
firewall rules), which it must say rather than claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from choir.core.security.mountinfo import mount_at, parse_mountinfo

WORKSPACE_TARGET: Final = "/workspace"
SOCKET_DIR_TARGET: Final = "/run/choir"
SOCKET_TARGET: Final = f"{SOCKET_DIR_TARGET}/choir.sock"
"""The agent's socket is mounted as its directory (`$CHOIR_HOME/socks/agents/<id>/`), not as a
file: a restarted choird makes a new socket — a new inode — at the same host path, which a file
bind mount would never show the container; a directory mount does (issue 12 point 5)."""
REPO_TARGET: Final = "/agent-repo"
"""Where an agent that may propose repo changes (`choir.propose.repo_change`) sees its own repo,
read-only, to clone it into /workspace: docker's `mode: ro`, bwrap's `--ro-bind`. Not under
/choir, the image's (or the sandbox's read-only) tree, where bwrap could make no mount point."""
FORBIDDEN_NETWORKS: Final = ("host",)
"""Network modes that would share a host namespace (`container:<id>` is refused as well)."""
TMPFS_OPTIONS: Final = "rw,nosuid,nodev,size={size},mode={mode},uid={uid},gid={gid}"
TMPFS_SIZES: Final = {"/tmp": ("512m", "1777"), "/run": ("16m", "0755")}
"""Writable scratch: `/tmp` (and HOME under it) and `/run`; everything else is read-only."""


@dataclass(frozen=True, slots=True)
class ContainerLimits:
    """cgroup limits of one agent container (config.json `container`)."""

    cpus: float
    memory_bytes: int
    pids: int


@dataclass(frozen=True, slots=True)
class SecurityProfile:
    """Everything §15.3 requires of an agent container, and the user it runs as."""

    limits: ContainerLimits
    user: str
    """`uid:gid` — the agent's own (`agent_users`) when choird is root, else choird's; never 0.
    The workspace and the socket belong to it, as every capability is dropped."""
    network: str = "bridge"
    mounts_enforced: bool = True
    """Whether the workspace must be `nosuid,nodev` (choird, as root, mounts it so); without
    root the item is advisory and the workspace's private mode is the protection."""
    cap_drop: tuple[str, ...] = ("ALL",)
    security_opt: tuple[str, ...] = ("no-new-privileges",)

    def tmpfs(self) -> dict[str, str]:
        uid, _, gid = self.user.partition(":")
        return {
            path: TMPFS_OPTIONS.format(size=size, mode=mode, uid=uid, gid=gid or uid)
            for path, (size, mode) in TMPFS_SIZES.items()
        }


@dataclass(frozen=True, slots=True)
class ProfileCheck:
    """One item of the profile: what it must be, what the container has."""

    item: str
    ok: bool
    expected: str
    actual: str
    required: bool = True
    """False for an advisory item: its failure is reported but does not fail the report."""


@dataclass(frozen=True, slots=True)
class ProfileReport:
    """The result of checking one running agent (`agent verify`)."""

    agent_id: str
    runtime: str
    checked_at: str
    """ISO 8601, UTC."""
    checks: tuple[ProfileCheck, ...]
    container: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks if check.required)

    @property
    def failed(self) -> list[str]:
        return [check.item for check in self.checks if not check.ok and check.required]

    @property
    def warnings(self) -> list[str]:
        """Advisory items that fail."""
        return [check.item for check in self.checks if not check.ok and not check.required]

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "runtime": self.runtime,
            "container": self.container,
            "checked_at": self.checked_at,
            "ok": self.ok,
            "checks": [
                {
                    "item": c.item,
                    "ok": c.ok,
                    "required": c.required,
                    "expected": c.expected,
                    "actual": c.actual,
                }
                for c in self.checks
            ],
        }


def create_options(
    profile: SecurityProfile, *, workspace: str, socket: str, repo: str | None = None
) -> dict[str, Any]:
    """docker SDK `containers.create` keyword arguments that apply `profile`; `socket` is the
    agent's socket on the host, whose directory is mounted; `repo` the agent's repo on the host,
    mounted read-only at `REPO_TARGET`."""
    limits = profile.limits
    volumes = {
        workspace: {"bind": WORKSPACE_TARGET, "mode": "rw"},
        socket_dir(socket): {"bind": SOCKET_DIR_TARGET, "mode": "rw"},
    }
    if repo is not None:
        volumes[repo] = {"bind": REPO_TARGET, "mode": "ro"}
    return {
        "user": profile.user,
        "cap_drop": list(profile.cap_drop),
        "security_opt": list(profile.security_opt),
        "read_only": True,
        "tmpfs": profile.tmpfs(),
        "nano_cpus": nano_cpus(limits.cpus),
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "pids_limit": limits.pids,
        "network_mode": profile.network,
        "privileged": False,
        "init": True,
        "volumes": volumes,
    }


def socket_dir(socket: str) -> str:
    """The host directory mounted at /run/choir: the one holding only the agent's socket."""
    return socket.rpartition("/")[0] or "/"


def nano_cpus(cpus: float) -> int:
    return round(cpus * 1e9)


@dataclass(frozen=True)
class _Container:
    """The parts of `docker inspect` the checks read."""

    host: Mapping[str, Any]
    mounts: Sequence[Mapping[str, Any]]
    user: str
    proc: Mapping[str, str] | None = field(default=None)
    mountinfo: str | None = field(default=None)

    @classmethod
    def of(
        cls, inspect: Mapping[str, Any], proc: Mapping[str, str] | None, mountinfo: str | None
    ) -> _Container:
        config = inspect.get("Config") or {}
        return cls(
            inspect.get("HostConfig") or {},
            inspect.get("Mounts") or [],
            config.get("User", ""),
            proc,
            mountinfo,
        )


def check_container(
    profile: SecurityProfile,
    inspect: Mapping[str, Any],
    *,
    workspace: str,
    socket: str,
    repo: str | None = None,
    proc_status: Mapping[str, str] | None = None,
    mountinfo: str | None = None,
) -> tuple[ProfileCheck, ...]:
    """Every §15.3 item, from `docker inspect` and, when given, `/proc/<pid>/status` and
    `/proc/<pid>/mountinfo` of the container's main process (the kernel's word on capabilities,
    no_new_privs, seccomp, its uid and its mounts). `repo`: the agent's repo on the host when it
    was started with it (`create_options`), which must then be mounted read-only."""
    c = _Container.of(inspect, proc_status, mountinfo)
    repo_checks = (_repo_read_only(c),) if repo is not None else ()
    return (
        _cap_drop(profile, c),
        _no_new_privileges(c),
        _flag("read_only_rootfs", c.host.get("ReadonlyRootfs"), want=True),
        _tmpfs(c),
        _limit("cpu_limit", c.host.get("NanoCpus"), nano_cpus(profile.limits.cpus)),
        _limit("memory_limit", c.host.get("Memory"), profile.limits.memory_bytes),
        _limit("pids_limit", c.host.get("PidsLimit"), profile.limits.pids),
        _seccomp(c),
        _flag("not_privileged", c.host.get("Privileged"), want=False),
        _no_docker_socket(c),
        _namespace("no_host_pid", c.host.get("PidMode")),
        _network(profile, c.host.get("NetworkMode")),
        _namespace("no_host_ipc", c.host.get("IpcMode")),
        _no_devices(c),
        _mounts(c, workspace=workspace, socket=socket, repo=repo),
        ProfileCheck("user", c.user == profile.user, profile.user, c.user or "(image default)"),
        _not_root(c),
        _workspace_nosuid(profile, c),
        *repo_checks,
    )


def _flag(item: str, actual: object, *, want: bool) -> ProfileCheck:
    return ProfileCheck(item, actual is want, _render(want), _render(actual))


def _cap_drop(profile: SecurityProfile, c: _Container) -> ProfileCheck:
    dropped = list(c.host.get("CapDrop") or [])
    added = list(c.host.get("CapAdd") or [])
    ok = [d.upper() for d in dropped] == list(profile.cap_drop) and not added
    actual = f"drop {_render(dropped)}, add {_render(added)}"
    if c.proc is not None:
        effective = c.proc.get("CapEff", "?")
        ok = ok and _zero(effective) and _zero(c.proc.get("CapBnd", "?"))
        actual += f"; kernel CapEff={effective} CapBnd={c.proc.get('CapBnd', '?')}"
    return ProfileCheck("cap_drop_all", ok, "drop [ALL], add []", actual)


def _no_new_privileges(c: _Container) -> ProfileCheck:
    options = list(c.host.get("SecurityOpt") or [])
    ok = any(o in ("no-new-privileges", "no-new-privileges:true") for o in options)
    actual = f"security_opt {_render(options)}"
    if c.proc is not None:
        ok = ok and c.proc.get("NoNewPrivs") == "1"
        actual += f"; kernel NoNewPrivs={c.proc.get('NoNewPrivs', '?')}"
    return ProfileCheck("no_new_privileges", ok, "no-new-privileges", actual)


def _tmpfs(c: _Container) -> ProfileCheck:
    tmpfs = dict(c.host.get("Tmpfs") or {})
    ok = sorted(tmpfs) == sorted(TMPFS_SIZES) and all("nosuid" in o for o in tmpfs.values())
    return ProfileCheck("tmpfs", ok, "/run, /tmp (nosuid)", _render(sorted(tmpfs)))


def _limit(item: str, actual: object, expected: int) -> ProfileCheck:
    return ProfileCheck(item, actual == expected, str(expected), _render(actual))


def _seccomp(c: _Container) -> ProfileCheck:
    custom = [o for o in c.host.get("SecurityOpt") or [] if str(o).startswith("seccomp")]
    ok = not custom
    actual = f"security_opt {_render(custom)}" if custom else "engine default"
    if c.proc is not None:
        mode = c.proc.get("Seccomp", "?")
        ok = ok and mode == "2"
        actual += f"; kernel Seccomp={mode}"
    return ProfileCheck("seccomp_default", ok, "engine default (filter mode 2)", actual)


def _no_docker_socket(c: _Container) -> ProfileCheck:
    sources = [str(m.get("Source", "")) for m in c.mounts]
    sockets = [s for s in sources if s.endswith("docker.sock")]
    return ProfileCheck("no_docker_socket", not sockets, "none mounted", _render(sockets))


def _namespace(item: str, mode: object) -> ProfileCheck:
    return ProfileCheck(item, mode != "host", "not host", _render(mode or "private"))


def _network(profile: SecurityProfile, mode: object) -> ProfileCheck:
    text = str(mode or "")
    ok = text == profile.network and not forbidden_network(text)
    return ProfileCheck("no_host_network", ok, profile.network, _render(text))


def forbidden_network(network: str) -> bool:
    """True for a network mode that shares another namespace (host, another container's)."""
    return network in FORBIDDEN_NETWORKS or network.startswith("container:")


def _no_devices(c: _Container) -> ProfileCheck:
    found = [
        *(c.host.get("Devices") or []),
        *(c.host.get("DeviceRequests") or []),
        *(c.host.get("DeviceCgroupRules") or []),
    ]
    return ProfileCheck("no_devices", not found, "none", _render(found))


def _mounts(c: _Container, *, workspace: str, socket: str, repo: str | None) -> ProfileCheck:
    """The workspace and the socket's directory read-write, the repo (if any) read-only, and
    nothing else."""
    sockets = socket_dir(socket)
    expected = {
        (workspace, WORKSPACE_TARGET, "bind", True),
        (sockets, SOCKET_DIR_TARGET, "bind", True),
    }
    if repo is not None:
        expected.add((repo, REPO_TARGET, "bind", False))
    found = {
        (str(m.get("Source")), str(m.get("Destination")), str(m.get("Type")), m.get("RW") is True)
        for m in c.mounts
    }
    ok = found == expected and not c.host.get("VolumesFrom")
    return ProfileCheck(
        "only_workspace_and_socket_mounted", ok, _rendered(expected), _rendered(found) or "none"
    )


def _rendered(mounts: set[tuple[str, str, str, bool]]) -> str:
    return ", ".join(f"{t}:{s}->{d}{'' if rw else ' (ro)'}" for s, d, t, rw in sorted(mounts))


def _repo_read_only(c: _Container) -> ProfileCheck:
    """The repo mount read-only in the container's own mount table (docker's `RW` is only what
    the engine was asked); from docker's word alone when choird cannot see the kernel's."""
    expected = f"{REPO_TARGET} mounted ro"
    if c.mountinfo is None:
        ok = any(m.get("Destination") == REPO_TARGET and m.get("RW") is False for m in c.mounts)
        actual = f"docker: {'ro' if ok else 'rw'} (choird cannot see the container's mounts)"
        return ProfileCheck("repo_read_only", ok, expected, actual)
    mount = mount_at(parse_mountinfo(c.mountinfo), REPO_TARGET)
    options = sorted(mount.options) if mount is not None else []
    actual = f"kernel: {','.join(options) or 'not mounted'}"
    return ProfileCheck("repo_read_only", "ro" in options, expected, actual)


def _not_root(c: _Container) -> ProfileCheck:
    uid = c.user.partition(":")[0]
    ok = uid not in ("", "0", "root")
    actual = f"user {c.user or '(image default)'}"
    if c.proc is not None:
        uids = c.proc.get("Uid", "?").split()
        ok = ok and len(uids) == 4 and "0" not in uids
        actual += f"; kernel Uid={'/'.join(uids)}"
    return ProfileCheck("user_not_root", ok, "a uid other than 0", actual)


def _workspace_nosuid(profile: SecurityProfile, c: _Container) -> ProfileCheck:
    """From the container's own mount table: docker inspect cannot show a bind's flags."""
    expected = f"{WORKSPACE_TARGET} mounted nosuid,nodev"
    required = profile.mounts_enforced
    if c.mountinfo is None:
        actual = "unknown: choird cannot see the container's mounts"
        return ProfileCheck("workspace_nosuid_nodev", False, expected, actual, required=required)
    mount = mount_at(parse_mountinfo(c.mountinfo), WORKSPACE_TARGET)
    options = sorted(mount.options) if mount is not None else []
    ok = {"nosuid", "nodev"} <= set(options)
    actual = f"kernel: {','.join(options) or 'not mounted'}"
    if not ok and not required:
        actual += " (choird is not root, so it cannot mount it nosuid: the workspace is private)"
    return ProfileCheck("workspace_nosuid_nodev", ok, expected, actual, required=required)


def _zero(hex_mask: str) -> bool:
    try:
        return int(hex_mask, 16) == 0
    except ValueError:
        return False


def _render(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def parse_proc_status(text: str) -> dict[str, str]:
    """`/proc/<pid>/status` as `{field: value}`."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def unsandboxed(agent_id: str, checked_at: str) -> ProfileReport:
    """The process runtime's answer: no item of the profile applies to a host process."""
    check = ProfileCheck(
        "sandbox",
        False,
        "a container with the §15.3 profile",
        "a host process (process runtime, unsandboxed): run choird with --runtime docker",
    )
    return ProfileReport(agent_id, "process", checked_at, (check,))
