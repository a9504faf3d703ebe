"""asyncpg connections that speak choir's types: jsonb as Python dicts, pgvector as `Vector`.

Every connection (pooled or not) gets the same codecs, so a payload written as a dict comes back
as a dict — any string in it, NUL included (`jsonb_safe`) — and an embedding goes in as a list
of floats. `vector` must exist before its codec can be registered, so the extension is created
once, before the pool opens its first connection.
Connection failures become one-line `UnavailableError`s naming the server that failed. A pool
may be given an observer that hears how every query ended, so choird notices a full disk or a
vanished server where it happens (`choir.store.postgres.failures`), whoever ran the query.

A connection goes back to the pool without asyncpg's reset query (`RESET ALL; UNLISTEN *; CLOSE
ALL; pg_advisory_unlock_all()`): choir leaves no session state on a pooled connection — roles
and search paths are `SET LOCAL`, advisory locks are transaction-scoped, nobody LISTENs — and
asyncpg still rolls back a transaction left open. The query was one more round trip to Postgres
per acquire: a fifth of a heartbeat's.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from pgvector.asyncpg import register_vector

from choir.errors import UnavailableError
from choir.store.postgres.jsonb_safe import decode_json, encode_json
from choir.store.postgres.target import ConnectParams

CONNECT_TIMEOUT_S: Final = 5.0
READY_TIMEOUT_S: Final = 10.0
READY_POLL_S: Final = 0.05
JSONB_VERSION: Final = b"\x01"
"""The first byte of jsonb's binary wire format."""

Connection: TypeAlias = asyncpg.Connection | PoolConnectionProxy
"""What store functions take: a plain connection or one acquired from the pool."""
Pool: TypeAlias = asyncpg.Pool
QueryObserver: TypeAlias = Callable[[BaseException | None], None]
"""Told how each query on a pooled connection ended: its exception, or None on success."""


def _encode_jsonb(value: Any) -> bytes:
    return JSONB_VERSION + encode_json(value)


def _decode_jsonb(data: bytes) -> Any:
    return decode_json(data, len(JSONB_VERSION))


async def init_connection(conn: asyncpg.Connection) -> None:
    """Register choir's codecs on a fresh connection (jsonb/json via orjson, pgvector)."""
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=_encode_jsonb, decoder=_decode_jsonb, format="binary"
    )
    await conn.set_type_codec(
        "json", schema="pg_catalog", encoder=encode_json, decoder=decode_json, format="binary"
    )
    await register_vector(conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing to undo (see the module's docstring)."""


async def ensure_vector_extension(params: ConnectParams) -> None:
    """Create pgvector in the target database if missing (needs a role allowed to do so)."""
    conn = await connect_plain(params)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except asyncpg.PostgresError as exc:
        raise UnavailableError(
            f"cannot enable pgvector in Postgres at {params.where}: {exc}; install pgvector "
            "there or run CREATE EXTENSION vector as a superuser"
        ) from exc
    finally:
        await conn.close()


async def connect(params: ConnectParams) -> asyncpg.Connection:
    """One connection with choir's codecs; the `vector` extension must already exist."""
    conn = await connect_plain(params)
    try:
        await init_connection(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


@asynccontextmanager
async def open_pool(
    params: ConnectParams,
    *,
    min_size: int = 2,
    max_size: int = 10,
    observe: QueryObserver | None = None,
    idle_close_s: float = 300.0,
) -> AsyncIterator[Pool]:
    """A connection pool with choir's codecs on every connection, closed on exit; `observe`
    hears the outcome of every query run on it. A connection above `min_size` idle for
    `idle_close_s` is closed."""
    await ensure_vector_extension(params)

    async def init(conn: asyncpg.Connection) -> None:
        await init_connection(conn)
        if observe is not None:
            conn.add_query_logger(lambda record: observe(record.exception))

    try:
        pool: Pool = await asyncpg.create_pool(
            **params.connect_kwargs(),
            min_size=min_size,
            max_size=max_size,
            timeout=CONNECT_TIMEOUT_S,
            init=init,
            reset=_keep_session,
            max_inactive_connection_lifetime=idle_close_s,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise unreachable(params, exc) from exc
    try:
        yield pool
    finally:
        await pool.close()


async def wait_until_ready(params: ConnectParams, *, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll until a server that is starting up accepts connections; bounded by `timeout_s`.

    Only "not listening yet" (OSError, timeouts included) and "starting up" are retried; any
    other failure, such as a missing database, is final.
    """
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            await (await _connect(params)).close()
        except (OSError, asyncpg.CannotConnectNowError) as exc:
            if asyncio.get_running_loop().time() >= deadline:
                raise unreachable(params, exc) from exc
            await asyncio.sleep(READY_POLL_S)
        except asyncpg.PostgresError as exc:
            raise unreachable(params, exc) from exc
        else:
            return


async def connect_plain(params: ConnectParams) -> asyncpg.Connection:
    """A connection without choir's codecs, for admin work such as creating databases."""
    try:
        return await _connect(params)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise unreachable(params, exc) from exc


async def _connect(params: ConnectParams) -> asyncpg.Connection:
    conn: asyncpg.Connection = await asyncpg.connect(
        **params.connect_kwargs(), timeout=CONNECT_TIMEOUT_S
    )
    return conn


def unreachable(params: ConnectParams, exc: BaseException) -> UnavailableError:
    """The operator-facing error for a failed connection to `params`."""
    return UnavailableError(
        f"cannot connect to Postgres at {params.where}: {connect_failure_reason(exc)}; "
        "check postgres in config.json"
    )


def connect_failure_reason(exc: BaseException) -> str:
    """A short, secret-free reason for a connection failure."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT_S:g}s"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, FileNotFoundError):
        return "no server socket there"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
