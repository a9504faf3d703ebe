"""The `$CHOIR_HOME` directory (§6.3): where choird keeps config, secrets, clones, sockets, logs."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOME = "~/.choir.d"
ENV_VAR = "CHOIR_HOME"


@dataclass(frozen=True)
class ChoirHome:
    """Paths inside one `$CHOIR_HOME`. Pure: constructing one touches no files."""

    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> ChoirHome:
        """The home named explicitly, else `$CHOIR_HOME`, else `~/.choir.d`."""
        raw = explicit if explicit is not None else os.environ.get(ENV_VAR) or DEFAULT_HOME
        return cls(Path(raw).expanduser().absolute())

    @property
    def config_file(self) -> Path:
        return self.root / "config.json"

    @property
    def secrets_file(self) -> Path:
        return self.root / "secrets.json"

    @property
    def repos(self) -> Path:
        return self.root / "repos"

    @property
    def global_repo_clone(self) -> Path:
        return self.repos / "global"

    def agent_repo_clone(self, agent_id: str) -> Path:
        return self.repos / "agents" / agent_id

    @property
    def sources(self) -> Path:
        """The operator's own local repos that `choirctl init` creates (global, agents/<id>)."""
        return self.root / "sources"

    @property
    def socks(self) -> Path:
        return self.root / "socks"

    @property
    def operator_socket(self) -> Path:
        return self.socks / "choird.sock"

    @property
    def agent_socks(self) -> Path:
        return self.socks / "agents"

    def agent_socket(self, agent_id: str) -> Path:
        """In a directory of its own, which a container mounts (a restarted choird's new socket
        then appears inside it)."""
        return self.agent_socks / agent_id / "choir.sock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def log_archive(self) -> Path:
        return self.logs / "archive"

    @property
    def choird_log(self) -> Path:
        return self.logs / "choird.log"

    def agent_log(self, agent_id: str) -> Path:
        return self.logs / f"{agent_id}.log"

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def workspaces(self) -> Path:
        """Default parent of the workspaces the skeleton config declares."""
        return self.root / "workspaces"

    def directories(self) -> list[Path]:
        """Every directory of the §6.3 layout, parents first."""
        return [
            self.root,
            self.repos,
            self.repos / "agents",
            self.socks,
            self.agent_socks,
            self.logs,
            self.log_archive,
            self.workspaces,
        ]

    def private_directories(self) -> list[Path]:
        """Directories no other host user may enter: sockets, logs, and the workspaces (what an
        agent leaves there — a setuid file, say — must be out of everyone else's reach)."""
        return [self.socks, self.agent_socks, self.logs, self.workspaces]

    def create_directories(self) -> None:
        """Create the layout, and take group/other access off existing private directories
        (an older home's `workspaces/` was 0755). The root is traverse-only for others (0711)
        because embedded Postgres, when choird runs as root, serves `pgdata` as its own
        unprivileged user. A mode is only ever narrowed, never widened."""
        private = self.private_directories()
        for path in self.directories():
            if not path.exists():
                path.mkdir(parents=True, exist_ok=True)
                path.chmod(0o700 if path in private else 0o711 if path == self.root else 0o755)
            elif path in private:
                narrow(path)


def narrow(path: Path) -> int | None:
    """Take group and other permissions off a directory (a symlink is left alone); its former
    mode when it changed."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o077:
        return None
    os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
    return stat.S_IMODE(st.st_mode)
