"""Where choird's Postgres is: an embedded server under a data directory, or an external one.

These are plain values so the daemon can map `config.json`'s `postgres` section (and the secret
it names) onto them without this package importing the config model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

DEFAULT_DATABASE: Final = "choir"


@dataclass(frozen=True, slots=True)
class ConnectParams:
    """Everything asyncpg needs to open a connection; the password never appears in reprs."""

    host: str
    """A hostname, an IP address, or (for a Unix socket) the directory holding the socket."""
    port: int
    database: str
    user: str
    password: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        """`host:port/database`, for messages that tell the operator which server failed."""
        return f"{self.host}:{self.port}/{self.database}"

    def with_database(self, database: str) -> ConnectParams:
        return ConnectParams(self.host, self.port, database, self.user, self.password)

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `asyncpg.connect` / `asyncpg.create_pool`."""
        return {
            "host": self.host,
            "port": self.port,
            "database": self.database,
            "user": self.user,
            "password": self.password,
        }


@dataclass(frozen=True, slots=True)
class EmbeddedTarget:
    """PostgreSQL + pgvector from the `pgserver` wheel, data in `datadir` ($CHOIR_HOME/pgdata)."""

    datadir: Path
    database: str = DEFAULT_DATABASE
    """Created on first start; the server's own `postgres` database is left alone."""


@dataclass(frozen=True, slots=True)
class ExternalTarget:
    """An operator-run PostgreSQL with pgvector; the database must already exist (§6.2)."""

    host: str
    port: int
    database: str
    user: str
    password: str | None = field(default=None, repr=False)

    def params(self) -> ConnectParams:
        return ConnectParams(self.host, self.port, self.database, self.user, self.password)


PostgresTarget = EmbeddedTarget | ExternalTarget
