"""Fixtures every test package shares: one embedded Postgres per test session, a fresh database
per test; and the `serial` marker's pass selection.

Starting the server costs about half a second (initdb on first use); a database costs a few
hundredths of a second, so each test gets its own and can never see another test's rows. Each
is a copy of a template that already has pgvector (creating the extension in every database
took longer than the copy), and the server runs without fsync: it is thrown away with the
session, and every CREATE DATABASE otherwise waits on the disk (0.3-0.4 s a test on a loaded
2-core machine). fsync guards against a host crash only: a killed postmaster or backend loses
nothing without it (the kernel keeps what was written), so the fault tests hold just as well.
Roles are cluster-wide, so tests that create agent roles use agent ids unique to the test.

Under pytest-xdist every worker is its own session, so each worker starts its own server (in
its own private directory, reached over a Unix socket there): workers never share a cluster,
and a worker's crash cannot take another's databases with it.

Tests marked `serial` measure timing or change what the whole host shares (its routes, its
open-file headroom): `./dev test` runs everything else in parallel first
(`--serial-tests=skip`), then the serial ones alone (`--serial-tests=only`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.idents import quote_ident
from choir.store.postgres.pool import connect_plain, ensure_vector_extension, wait_until_ready
from choir.store.postgres.target import ConnectParams

# Property tests check results, not speed: the suite runs on shared, loaded machines, where
# hypothesis's default 200 ms deadline per example can fail a correct test.
settings.register_profile("choir", deadline=None)
settings.load_profile("choir")

pytest_plugins = ("tests.harness.failure_logs", "tests.harness.fixtures")

SERIAL_CHOICES = ("include", "skip", "only")
TEMPLATE = "choir_test_template"
"""The database every test's database is copied from: empty but for pgvector."""
THROWAWAY = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
"""The session server's settings beyond choir's: its data dies with the session."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--serial-tests",
        choices=SERIAL_CHOICES,
        default="include",
        help="run the tests marked serial with the others (include, the default), leave them "
        "out (skip: the parallel pass of ./dev test) or run only them (only)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Longest first: xdist hands tests out one at a time in this order (`--maxschedchunk=1` in
    # ./dev test), so the end-to-end ones (marked `slow`, 5-60 s each) are shared among
    # the workers from the start and the last minutes are filled with short ones, rather than
    # one worker running the slow tests while the others sit idle.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    which = config.getoption("--serial-tests")
    if which == "include":
        return
    wanted = which == "only"
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        serial = item.get_closest_marker("serial") is not None
        (kept if serial == wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", autouse=True)
def build_cache() -> Iterator[Path]:
    """One wheel cache for every agent image build of the session, kept between runs.

    Without it each test home would build choir's wheels and download choir-agent's
    dependencies again under its own `$CHOIR_HOME/build` (`choir.daemon.images.wheelhouse`).
    `$CHOIR_TEST_BUILD_CACHE` moves it.
    """
    cache = Path(
        os.environ.get("CHOIR_TEST_BUILD_CACHE")
        or Path(tempfile.gettempdir()) / f"choir-test-build-cache-{os.getuid()}"
    )
    saved = os.environ.get("CHOIR_BUILD_CACHE")
    os.environ["CHOIR_BUILD_CACHE"] = str(cache)
    try:
        yield cache
    finally:
        if saved is None:
            os.environ.pop("CHOIR_BUILD_CACHE", None)
        else:
            os.environ["CHOIR_BUILD_CACHE"] = saved


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedPostgres]:
    with private_dir() as root:
        server = EmbeddedPostgres(root / "data")
        server.start()
        try:
            asyncio.run(prepare(server))
            yield server
        finally:
            server.stop()


async def prepare(server: EmbeddedPostgres) -> None:
    """The session server ready: its throwaway settings applied, the template made."""
    await wait_until_ready(server.params)
    admin = await connect_plain(server.params)
    try:
        for name, value in THROWAWAY.items():
            await admin.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        await admin.execute("SELECT pg_reload_conf()")
        await admin.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await admin.close()
    await ensure_vector_extension(server.params.with_database(TEMPLATE))


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A directory for a test's own Postgres data directory."""
    with private_dir() as root:
        yield root


@contextmanager
def private_dir() -> Iterator[Path]:
    """A temporary directory outside pytest's shared basetemp.

    pytest prunes old numbered directories under /tmp/pytest-of-<user> when any other pytest
    run starts; a live server's data directory must not be among them.
    """
    root = Path(tempfile.mkdtemp(prefix="choir-pg-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def pg_params(pg_server: EmbeddedPostgres) -> AsyncIterator[ConnectParams]:
    """A new, empty database with pgvector; dropped (connections and all) after the test."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    admin = await connect_plain(pg_server.params)
    try:
        await admin.execute(f"CREATE DATABASE {quote_ident(name)} TEMPLATE {TEMPLATE}")
        yield pg_server.params.with_database(name)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)} WITH (FORCE)")
        await admin.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Once per run (not per xdist worker): drop the agent images of homes the tests removed."""
    if hasattr(session.config, "workerinput"):
        return
    from tests.docker_support import prune_orphan_images

    prune_orphan_images()
