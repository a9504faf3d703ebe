"""The host's side of an agent container's profile (pure): what the kernel and `docker inspect`
of the container cannot say.

- `workspace_private`: the workspace directory belongs to the container's uid and no other host
  user may read or traverse it — nothing an agent leaves there (a setuid copy of a shell, say)
  is reachable by anyone else.
- `no_socket_exposed`: no mount (but the agent's own socket) puts a Unix socket within the
  agent's reach: not `$CHOIR_HOME` or anything around it, not `$CHOIR_HOME/socks` or anything in
  it, not the Docker socket's directory, and no socket file found inside (a bounded scan).
- `egress_filtered`: the container is on the choir network of its policy and that network's
  rules are in place (`egress_rules`). When choird cannot install rules (not root, no
  iptables) the item is advisory: it fails, saying why, without refusing the agent.

The runtime gathers the facts (`HostView`); these functions only compare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from choir.core.security.profile import (
    SOCKET_DIR_TARGET,
    ProfileCheck,
    SecurityProfile,
    socket_dir,
)


@dataclass(frozen=True, slots=True)
class WorkspaceView:
    """The workspace directory as the host sees it."""

    path: str
    mode: int
    uid: int
    gid: int


@dataclass(frozen=True, slots=True)
class SocketScan:
    """Unix sockets found under a mount's source."""

    found: tuple[str, ...]
    scanned: int
    complete: bool
    """False when the scan stopped at its bound."""


@dataclass(frozen=True, slots=True)
class MountSource:
    """A mount's source on the host: as docker has it, resolved, and what is inside."""

    source: str
    resolved: str
    sockets: SocketScan


@dataclass(frozen=True, slots=True)
class EgressView:
    """Egress filtering as choird set it up, and whether its rules are in place now."""

    network: str
    """The network the container must be on."""
    policy: str
    """What the policy blocks, for the report."""
    enforced: bool
    """Whether choird enforces the policy here (rules installed, or nothing to block); False
    when it cannot, `detail` saying why."""
    rules_ok: bool
    """Whether what enforcing needs is in place now."""
    detail: str
    """What was found: the rules, or why they are missing or not managed."""


@dataclass(frozen=True, slots=True)
class HostView:
    """Everything the host-side checks read."""

    home: str
    socks: str
    docker_socket_dir: str | None
    workspace: WorkspaceView | None
    mounts: tuple[MountSource, ...]
    """Every mount of the container but the agent's own socket."""
    egress: EgressView


def check_host(
    profile: SecurityProfile, inspect: Mapping[str, Any], host: HostView
) -> tuple[ProfileCheck, ...]:
    return (
        _workspace_private(profile, host.workspace),
        _no_socket_exposed(host),
        _egress(inspect, host.egress),
    )


def _workspace_private(profile: SecurityProfile, workspace: WorkspaceView | None) -> ProfileCheck:
    uid, _, gid = profile.user.partition(":")
    expected = f"owned by {uid}:{gid or uid}, no group/other access"
    if workspace is None:
        return ProfileCheck("workspace_private", False, expected, "workspace not found")
    owner = f"{workspace.uid}:{workspace.gid}"
    ok = owner == f"{uid}:{gid or uid}" and not workspace.mode & 0o077
    return ProfileCheck(
        "workspace_private", ok, expected, f"owned by {owner}, mode {workspace.mode:04o}"
    )


def _no_socket_exposed(host: HostView) -> ProfileCheck:
    problems: list[str] = []
    partial: list[str] = []
    for mount in host.mounts:
        problems.extend(_exposure(mount.resolved, host))
        problems.extend(f"socket {found}" for found in mount.sockets.found)
        if not mount.sockets.complete:
            partial.append(f"{mount.source} (first {mount.sockets.scanned} entries)")
    actual = "; ".join(problems) or "no socket reachable"
    if partial and not problems:
        actual += f"; scanned only {', '.join(partial)}"
    expected = "no socket, $CHOIR_HOME, its socks/ or the Docker socket's directory mounted"
    return ProfileCheck("no_socket_exposed", not problems, expected, actual)


def _exposure(resolved: str, host: HostView) -> list[str]:
    source = PurePosixPath(resolved)
    found = []
    if _contains(source, PurePosixPath(host.home)):
        found.append(f"{resolved} contains $CHOIR_HOME")
    elif _related(source, PurePosixPath(host.socks)):
        found.append(f"{resolved} exposes $CHOIR_HOME/socks")
    if host.docker_socket_dir and _related(source, PurePosixPath(host.docker_socket_dir)):
        found.append(f"{resolved} exposes the Docker socket's directory")
    return found


def _contains(outer: PurePosixPath, inner: PurePosixPath) -> bool:
    return outer == inner or outer in inner.parents


def _related(a: PurePosixPath, b: PurePosixPath) -> bool:
    """One contains the other."""
    return _contains(a, b) or _contains(b, a)


def _egress(inspect: Mapping[str, Any], egress: EgressView) -> ProfileCheck:
    mode = str((inspect.get("HostConfig") or {}).get("NetworkMode") or "")
    expected = f"network {egress.network}: {egress.policy}"
    if not egress.enforced:
        return ProfileCheck(
            "egress_filtered", False, expected, f"not filtered: {egress.detail}", required=False
        )
    ok = mode == egress.network and egress.rules_ok
    return ProfileCheck("egress_filtered", ok, expected, f"network {mode}, {egress.detail}")


def mounts_of(inspect: Mapping[str, Any], *, socket: str) -> Sequence[Mapping[str, Any]]:
    """The container's mounts but the agent's own socket directory (the one socket it must
    have, `socket`'s directory at /run/choir)."""
    return [
        mount
        for mount in inspect.get("Mounts") or []
        if (str(mount.get("Source")), str(mount.get("Destination")))
        != (socket_dir(socket), SOCKET_DIR_TARGET)
    ]
