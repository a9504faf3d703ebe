"""Embedded Postgres for a choird running as root, without opening any directory to others.

PostgreSQL refuses to run as root, so the server runs as the system user `pgserver`. pgserver's
own start-up lets that user reach the data directory and the binaries by adding g+rx,o+rx to
every parent directory (`ensure_prefix_permissions`): a 0700 HOME and `~/.choir.d` become
0755 (issue 11 point 5). choir never widens a permission the operator set. Instead the server
starts in a private mount namespace, where a tmpfs at `/run/choir-pg` holds bind mounts of the
data directory (at `data/<its own path>`) and of pgserver's installation (`lib/`): the server's
user reaches both there without crossing any of the operator's directories, and nothing outside
the namespace changes. The Unix socket is created in the data directory, where choird (root)
connects at its real path.

Where a private mount namespace is not allowed (a container without CAP_SYS_ADMIN), the server
is started directly only if its user can already traverse every parent; otherwise the start
is refused with the ways out — never by widening a mode.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from choir.errors import UnavailableError
from choir.store.postgres import pg_ctl, settings

SYSTEM_USER: Final = "pgserver"
"""The unprivileged user the server runs as (pgserver's choice, kept so data stays readable)."""
MOUNT_ROOT: Final = Path("/run/choir-pg")
"""Empty on the host; inside the server's namespace, a tmpfs holding the bind mounts."""
SOCKET_ROOT: Final = Path("/run/choir-pg-sock")
"""Socket directories for data directories whose path is too long for a Unix socket."""
NS_INSTALL: Final = MOUNT_ROOT / "lib" / "pgserver" / "pginstall"
NS_LIBS: Final = MOUNT_ROOT / "lib" / "pgserver.libs"
"""The wheel's binaries find their bundled libraries at `$ORIGIN/../../../pgserver.libs`, so
the installation keeps that layout inside the namespace."""
SOCKET_PATH_MAX: Final = 107
"""sun_path holds 108 bytes, the last one the terminating NUL."""
START_TIMEOUT_S: Final = 60


def ns_data(datadir: Path) -> Path:
    """Where the data directory is inside the namespace: its own path under `MOUNT_ROOT/data`,
    so `ps` still shows which home a server belongs to."""
    return MOUNT_ROOT / "data" / datadir.relative_to(datadir.anchor)


@dataclass(frozen=True)
class RootServer:
    """How to start one data directory's server as `SYSTEM_USER` from root."""

    datadir: Path
    install: Path
    """pgserver's `pginstall` (bin/, lib/, share/)."""

    @property
    def libs(self) -> Path:
        """The shared libraries the wheel bundles beside the package (auditwheel)."""
        return self.install.parent.parent / "pgserver.libs"

    @property
    def log_file(self) -> Path:
        return self.datadir / "log"

    def socket_dir(self) -> Path:
        """Where the server's socket is, as choird sees it: the data directory when the
        socket's path fits a Unix socket (also inside the namespace), else a directory of its
        own under /run."""
        longest = max(len(str(self.datadir)), len(str(ns_data(self.datadir))))
        if longest + len("/.s.PGSQL.5432") <= SOCKET_PATH_MAX:
            return self.datadir
        digest = hashlib.sha256(str(self.datadir).encode()).hexdigest()[:12]
        return SOCKET_ROOT / digest

    def host_socket_dir(self, recorded: str) -> Path:
        """The host path of the socket directory a postmaster.pid records (namespace paths are
        those of the namespace)."""
        return self.datadir if recorded == str(ns_data(self.datadir)) else Path(recorded)

    def start(self, ready: Callable[[], bool]) -> None:
        """initdb on first use, then `pg_ctl start`, returned from once `ready()`; blocking.
        Raises CalledProcessError or UnavailableError (no way to start without widening a
        permission)."""
        user = _system_user()
        self._own_datadir(user)
        namespaced = _namespaces_allowed()
        if namespaced:
            MOUNT_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
        else:
            self._refuse_unless_reachable(user)
        socket_dir = self.socket_dir()
        if socket_dir != self.datadir:
            _private_dir(socket_dir, user)
        if not (self.datadir / "PG_VERSION").exists():
            self._run(user, namespaced, self._initdb(namespaced))
            # before the first start, not the next: a new home's server runs as sized
            settings.apply(self.datadir)
        start = self._pg_ctl_start(namespaced, socket_dir)
        self._run(user, namespaced, start, done_when=ready)

    def _run(
        self,
        user: pwd.struct_passwd,
        namespaced: bool,
        step: list[str],
        done_when: Callable[[], bool] | None = None,
    ) -> None:
        """`step` as the server's user (in the private mount namespace when allowed)."""
        script = "set -e\n" + (self._mounts() if namespaced else "")
        script += _as_user(user, step) + "\n"
        command = ["unshare", "--mount", "--propagation", "private"] if namespaced else []
        argv = [*command, "/bin/sh", "-c", script]
        pg_ctl.run(argv, env=_environment(), timeout_s=START_TIMEOUT_S, done_when=done_when)

    def _own_datadir(self, user: pwd.struct_passwd) -> None:
        self.datadir.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self.datadir.stat()
        if (info.st_uid, info.st_gid) != (user.pw_uid, user.pw_gid):
            os.chown(self.datadir, user.pw_uid, user.pw_gid)
        if stat.S_IMODE(info.st_mode) & 0o077:
            self.datadir.chmod(0o700)  # PostgreSQL refuses a group- or world-readable one

    def _paths(self, namespaced: bool) -> tuple[Path, Path]:
        """(data directory, installation) as the server's user sees them."""
        return (ns_data(self.datadir), NS_INSTALL) if namespaced else (self.datadir, self.install)

    def _initdb(self, namespaced: bool) -> list[str]:
        data, install = self._paths(namespaced)
        return [
            str(install / "bin" / "initdb"),
            "-D",
            str(data),
            "--auth=trust",
            "--auth-local=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
        ]

    def _pg_ctl_start(self, namespaced: bool, socket_dir: Path) -> list[str]:
        data, install = self._paths(namespaced)
        inner_socket = data if socket_dir == self.datadir else socket_dir
        return [
            str(install / "bin" / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-t",
            str(START_TIMEOUT_S - 5),
            "-l",
            str(data / "log"),
            "-o",
            f'-h "" -k {inner_socket}',
            "start",
        ]

    def _mounts(self) -> str:
        """Shell lines (run as root in the new namespace): the tmpfs and the bind mounts."""
        binds = [(self.datadir, ns_data(self.datadir), ""), (self.install, NS_INSTALL, "ro")]
        if self.libs.is_dir():
            binds.append((self.libs, NS_LIBS, "ro"))
        lines = [f"mount -t tmpfs -o mode=0755,size=64k choir-pg {_q(MOUNT_ROOT)}"]
        for source, target, mode in binds:
            lines += [f"mkdir -p {_q(target)}", f"mount --bind {_q(source)} {_q(target)}"]
            if mode == "ro":
                lines.append(f"mount -o remount,bind,ro {_q(target)}")
        return "\n".join(lines) + "\n"

    def _refuse_unless_reachable(self, user: pwd.struct_passwd) -> None:
        for target in (self.datadir, self.install, self.libs):
            closed = closed_parent(target, user.pw_uid, user.pw_gid)
            if closed is not None:
                raise UnavailableError(
                    f"embedded Postgres runs as the user {SYSTEM_USER}, which cannot reach "
                    f"{target}: {closed} is closed to other users and this host allows no "
                    "private mount namespace; choir will not open it — run choird as a "
                    f"non-root user, allow traversal yourself (chmod o+x {closed}), or "
                    "configure an external Postgres in config.json"
                )


def _system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", SYSTEM_USER],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return pwd.getpwnam(SYSTEM_USER)


def _namespaces_allowed() -> bool:
    """Whether this process may make a private mount namespace (and mount in it)."""
    try:
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _q(path: Path) -> str:
    return shlex.quote(str(path))


def _as_user(user: pwd.struct_passwd, argv: list[str]) -> str:
    switch = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
    return shlex.join([*switch, "--", *argv])


def _environment() -> dict[str, str]:
    """The server's environment: a path and the locale initdb picks the cluster's from."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    for name in ("LANG", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "TZ"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.setdefault("LANG", "C.UTF-8")
    return env


def _private_dir(path: Path, user: pwd.struct_passwd) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o755)  # our own directory under /run, not the operator's
    os.chown(path, user.pw_uid, user.pw_gid)


def closed_parent(path: Path, uid: int, gid: int) -> Path | None:
    """The first directory above `path` that user `uid` (group `gid`) may not traverse."""
    for parent in reversed(path.parents):
        info = parent.stat()
        if info.st_uid == uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == gid:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return parent
    return None
