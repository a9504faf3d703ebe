"""A full disk under `$CHOIR_HOME` (issue 12 point 6 and point 9's torn log line).

Each scenario mounts a small tmpfs, fills it to the last byte, and checks what choir does: a log
record is written whole or not at all, the failure is reported as a full disk, and everything
comes back when space is freed. Bounded: the file systems are a few hundred KiB.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from choir.home import ChoirHome
from choir.logs import get_logger, setup_logging, shutdown_logging
from tests.faults.filesystems import fill, small_tmpfs


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "full", 256) as mountpoint:
        yield mountpoint


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    shutdown_logging()
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def parsed_lines(path: Path) -> list[dict[str, object]]:
    """Every line of `path` as JSON: fails on a torn line."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]


def test_a_log_record_is_written_whole_or_not_at_all_on_a_full_disk(tmpfs: Path) -> None:
    home = ChoirHome(tmpfs / "home")
    handler = setup_logging(home, "choird")
    errors: list[OSError | None] = []
    handler.on_write_error = lambda _path, error: errors.append(error)
    log = get_logger("choird.test")
    log.info("before the disk fills")
    filler = fill(tmpfs)

    log.info("a long record", fields={"blob": "x" * 6000})  # larger than the page left
    log.info("another one", fields={"blob": "y" * 6000})

    lines = parsed_lines(home.choird_log)  # no torn line: every line parses
    assert [line["message"] for line in lines] == ["before the disk fills"]
    assert handler.dropped == 2
    assert [e.errno for e in errors if e is not None] == [errno.ENOSPC, errno.ENOSPC]

    filler.unlink()
    log.info("after space was freed")
    messages = [line["message"] for line in parsed_lines(home.choird_log)]
    assert messages == [
        "before the disk fills",
        "2 log record(s) were lost: the disk was full or failing",
        "after space was freed",
    ]
    assert errors[-1] is None  # told that writing works again
    assert handler.lines == 3
