"""An adopted container's output is picked up right after what the previous choird copied
(`choir.daemon.runtimes.log_resume`): the engine is asked from a little before the log's last
change — the kernel's coarse file clock runs up to a tick behind the engine's — and the lines
the stream starts with that the log already ends with are dropped. Nothing lost, nothing twice.
Real files; the docker runtime's adoption is `tests/faults/test_start_rides_out_restart.py`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from choir.daemon.runtimes.log_resume import SLACK_S, TAIL_BYTES, SkipCopied, resume_point

COPIED = (b'{"n": 1}\n', b'{"n": 2}\n', b'{"n": 3}\n')


class Lines:
    """A sink keeping what it was given."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes, /) -> int:
        self.data += data
        return len(data)

    def flush(self) -> None:
        pass


def copied_through(chunks: list[bytes], copied: tuple[bytes, ...] = COPIED) -> bytes:
    sink = Lines()
    skipping = SkipCopied(sink, copied)
    for chunk in chunks:
        assert skipping.write(chunk) == len(chunk)
    skipping.finish()
    return sink.data


@pytest.mark.parametrize(
    ("chunks", "kept"),
    [
        ([b'{"n": 3}\n', b'{"n": 4}\n'], b'{"n": 4}\n'),  # the last line came again
        ([b'{"n": 2}\n{"n": 3}\n{"n": 4}\n'], b'{"n": 4}\n'),  # two, in one chunk
        ([b'{"n": 2}\n{"n"', b': 3}\n{"n": 4}', b"\n"], b'{"n": 4}\n'),  # split anyhow
        ([b'{"n": 4}\n', b'{"n": 3}\n'], b'{"n": 4}\n{"n": 3}\n'),  # new first: all kept
        ([b'{"n": 2}\n{"n": 2}\n'], b'{"n": 2}\n'),  # out of order: the second is new
        ([b'{"n": 3}\n'], b""),  # nothing new
        ([b"error: gave up"], b"error: gave up"),  # a last line without newline
        ([], b""),
    ],
)
def test_the_lines_copied_before_are_dropped_once(chunks: list[bytes], kept: bytes) -> None:
    assert copied_through(chunks) == kept


def test_with_nothing_copied_everything_passes() -> None:
    assert copied_through([b"a\n", b"b"], copied=()) == b"a\nb"


def test_the_resume_point_is_a_little_before_the_logs_last_change(tmp_path: Path) -> None:
    log = tmp_path / "agent-1.log"
    log.write_bytes(b"".join(COPIED) + b"cut")
    os.utime(log, (1_800_000_000.0, 1_800_000_000.0))
    point = resume_point(log)
    assert point is not None
    assert point.since == pytest.approx(1_800_000_000.0 - SLACK_S)
    assert point.copied == COPIED  # whole lines only


def test_a_long_logs_cut_first_line_is_not_among_the_copied(tmp_path: Path) -> None:
    log = tmp_path / "agent-1.log"
    log.write_bytes(b"x" * (TAIL_BYTES + 10) + b"\n" + b"".join(COPIED))
    point = resume_point(log)
    assert point is not None
    assert point.copied == COPIED


def test_no_log_means_copy_everything(tmp_path: Path) -> None:
    assert resume_point(tmp_path / "none.log") is None
