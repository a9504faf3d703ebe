"""Shared buffers sized at start for the data (`settings.shared_buffers_for`): 16 MB for a small
home, doubled while under half its largest database, at most 256 MB — so a home whose memory
index is large gets buffers for it, and a small home's resident memory does not grow."""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import connect_plain
from choir.store.postgres.settings import shared_buffers_for

MB = 2**20


def _database(datadir: Path, oid: int, sizes_mb: list[int]) -> None:
    """A database directory of relation files of the given sizes (sparse: nothing written)."""
    directory = datadir / "base" / str(oid)
    directory.mkdir(parents=True)
    for n, size in enumerate(sizes_mb):
        with (directory / str(16_384 + n)).open("wb") as file:
            file.truncate(size * MB)


@pytest.mark.parametrize(
    ("largest_mb", "buffers"),
    [(0, "16MB"), (32, "16MB"), (33, "32MB"), (100, "64MB"), (319, "256MB"), (4096, "256MB")],
)
def test_buffers_double_while_under_half_the_largest_database(
    tmp_path: Path, largest_mb: int, buffers: str
) -> None:
    _database(tmp_path, 5, [largest_mb // 2, largest_mb - largest_mb // 2])
    _database(tmp_path, 1, [10, 10])  # a smaller database is not added to the largest

    assert shared_buffers_for(tmp_path) == buffers


def test_a_data_directory_without_a_cluster_gets_the_floor(tmp_path: Path) -> None:
    assert shared_buffers_for(tmp_path / "missing") == "16MB"
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "pgsql_tmp").write_text("")  # a stray file is no database
    assert shared_buffers_for(tmp_path) == "16MB"


async def test_a_home_with_more_data_starts_with_more_buffers(scratch_dir: Path) -> None:
    datadir = scratch_dir / "pgdata"
    async with EmbeddedPostgres(datadir):
        pass  # initdb: the cluster gets choir.conf for its next start
    async with EmbeddedPostgres(datadir) as server:
        conn = await connect_plain(server.params)
        try:
            small = await conn.fetchval("SHOW shared_buffers")
            # ~40 MB of rows: over twice 16 MB, under twice 32 MB
            await conn.execute(
                "CREATE TABLE filler AS SELECT repeat('x', 900) AS text "
                "FROM generate_series(1, 40000)"
            )
            await conn.execute("CHECKPOINT")  # the files have their size on disk
        finally:
            await conn.close()

    async with EmbeddedPostgres(datadir) as server:
        conn = await connect_plain(server.params)
        try:
            grown = await conn.fetchval("SHOW shared_buffers")
        finally:
            await conn.close()
    assert (small, grown) == ("16MB", "32MB")
