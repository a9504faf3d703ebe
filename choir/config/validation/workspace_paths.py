"""Workspace paths that would hand an agent the host or the control plane.

A workspace is mounted read-write into the agent's container and emptied by `workspace reset`.
Pointed at `/` or `/etc`, the agent writes host files and a reset deletes a host tree; pointed at
`$CHOIR_HOME` or its `socks/`, a tool reaches the operator API and every agent's socket; pointed
at the Docker socket's directory, it reaches the engine (root on the host). So a workspace is
refused, after resolving symlinks (a link to `/etc` is `/etc`), when it is:

- in a system tree, or the tree itself: `TREES` (`/etc`, `/usr`, `/run`, …);
- one of the `ROOTS` themselves (`/`, `/home`, `/var`, `/tmp`, …; a directory inside them is
  fine), or a user's home directory itself, or a hidden entry of one (`~/.ssh`: its keys and
  login scripts);
- `$CHOIR_HOME`, inside it or containing it — except a directory of its own under
  `$CHOIR_HOME/workspaces/`, where `choirctl init` puts the default one;
- the Docker socket's directory, inside it or containing it.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

TREES: Final = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/run",
    "/var/lib/docker",
)
"""System trees: the directory and everything inside it are the host's."""
ROOTS: Final = (
    "/",
    "/home",
    "/media",
    "/mnt",
    "/opt",
    "/root",
    "/srv",
    "/tmp",
    "/var",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/tmp",
)
"""Directories shared by everything below them: refused themselves, fine to work inside."""
DEFAULT_DOCKER_SOCKET: Final = "/var/run/docker.sock"


@dataclass(frozen=True)
class Protected:
    """What no workspace may be, every path resolved."""

    trees: frozenset[PurePosixPath]
    roots: frozenset[PurePosixPath]
    homes: frozenset[PurePosixPath]
    choir_home: PurePosixPath
    docker_dir: PurePosixPath | None


def refusal(path: PurePosixPath, protected: Protected) -> str | None:
    """Why the (resolved) workspace `path` must be refused, or None. Pure."""
    if path in protected.roots:
        return "is a system directory shared by everything below it"
    for tree in sorted(protected.trees):
        if path == tree:
            return "is a system directory"
        if tree in path.parents:
            return f"is inside {tree}, a system directory"
        if path in tree.parents:
            return f"contains {tree}, a system directory"
    home = protected.choir_home
    own_workspaces = home / "workspaces"
    if path == home or path in home.parents:
        return f"contains $CHOIR_HOME ({home}): its sockets, secrets and database"
    if home in path.parents and own_workspaces not in path.parents:
        return f"is inside $CHOIR_HOME ({home}); only {own_workspaces}/<name> is for workspaces"
    if path in protected.homes:
        return "is a home directory"
    if path.parent in protected.homes and path.name.startswith("."):
        return f"is {path.name} in a home directory (its keys and login scripts)"
    docker = protected.docker_dir
    if docker is not None and (path == docker or docker in path.parents or path in docker.parents):
        return f"exposes the Docker socket's directory ({docker})"
    return None


Workspace = tuple[str, PurePosixPath]
"""A workspace's path as configured, and resolved (symlinks followed)."""


def workspace_problems(workspaces: Mapping[str, Workspace], protected: Protected) -> list[str]:
    """One `workspaces.<name>.path: …` line per refused workspace. Pure."""
    problems = []
    for name, (configured, resolved) in sorted(workspaces.items()):
        why = refusal(resolved, protected)
        if why is None:
            continue
        shown = configured
        if str(resolved) != os.path.normpath(configured):
            shown = f"{configured} (a link to {resolved})"
        problems.append(
            f"workspaces.{name}.path: {shown} {why}; an agent could write there and "
            "workspace reset would empty it: use a directory of its own, e.g. "
            f"{protected.choir_home / 'workspaces' / name}"
        )
    return problems


def dangerous_workspaces(workspaces: Mapping[str, str], choir_home: str) -> list[str]:
    """`workspace_problems` for paths as configured, on this host (links, homes, Docker)."""
    resolved = {name: (path, _resolved(path)) for name, path in workspaces.items()}
    return workspace_problems(resolved, host_protected(choir_home))


def host_protected(choir_home: str) -> Protected:
    """This host's protected directories, resolved (`/var/run` is often a link to `/run`)."""
    return Protected(
        trees=frozenset(map(_resolved, TREES)) | frozenset(map(PurePosixPath, TREES)),
        roots=frozenset(map(_resolved, ROOTS)),
        homes=frozenset(_resolved(home) for home in _home_directories()),
        choir_home=_resolved(choir_home),
        docker_dir=_docker_dir(),
    )


def _home_directories() -> Iterable[str]:
    """Users' home directories (not the `/nonexistent` or `/` of system accounts)."""
    homes = {entry.pw_dir for entry in pwd.getpwall()}
    if os.environ.get("HOME"):
        homes.add(os.environ["HOME"])
    return [home for home in homes if home.startswith("/") and home not in ("/", "/nonexistent")]


def _docker_dir() -> PurePosixPath | None:
    where = os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_DOCKER_SOCKET}"
    if not where.startswith("unix://"):
        return None  # an engine over TCP has no socket here
    return _resolved(os.path.dirname(where.removeprefix("unix://")))


def _resolved(path: str) -> PurePosixPath:
    return PurePosixPath(os.path.realpath(path))
