"""Live agent logs archived in place (§22.2, `choir.logs.live`): real writer processes appending
through their stderr as choir-agent does under the process runtime, choird's archiver copying
and emptying the same file meanwhile. Every line must end up exactly once, in order, in the
archives or the live file.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

from choir.home import ChoirHome
from choir.logs import archive_agent_log, archived_logs
from choir.logs.handler import AppendSink
from choir.logs.live import LineCount, LiveLogArchiver

WRITER = """
import logging, sys
from choir.logs.handler import WholeLineStreamHandler
handler = WholeLineStreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("%(message)s"))
log = logging.getLogger("w")
log.addHandler(handler)
log.setLevel(logging.INFO)
for n in range(int(sys.argv[1])):
    log.info("%s line %06d %s", sys.argv[2], n, "x" * 200)
"""


def spawn_writer(log: Path, name: str, lines: int) -> subprocess.Popen[bytes]:
    """A process whose stderr is the log, opened for appending (as `runtimes/process` does)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            [sys.executable, "-c", WRITER, str(lines), name], stderr=fd, close_fds=True
        )
    finally:
        os.close(fd)


def everything(home: ChoirHome, source: str) -> list[str]:
    archived = [
        line
        for path in archived_logs(home, source)
        for line in gzip.decompress(path.read_bytes()).decode().splitlines()
    ]
    live = home.agent_log(source)
    return archived + (live.read_text().splitlines() if live.exists() else [])


def test_two_writers_lose_and_double_no_line_while_archived_many_times(tmp_path: Path) -> None:
    home = ChoirHome(tmp_path / "choir.d")
    home.logs.mkdir(parents=True)
    log = home.agent_log("agent-1")
    per_writer = 4000
    writers = [spawn_writer(log, name, per_writer) for name in ("a", "b")]
    archiver, made = LiveLogArchiver(home), []
    deadline = time.monotonic() + 60
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        made += archiver.check(["agent-1"], 200)
    assert [w.wait(10) for w in writers] == [0, 0]
    assert len(made) >= 3  # archived again and again while both wrote
    assert archived_logs(home, "agent-1") == made
    lines = everything(home, "agent-1")
    for name in ("a", "b"):
        mine = [line.split()[2] for line in lines if line.startswith(f"{name} line ")]
        assert mine == [f"{n:06d}" for n in range(per_writer)]  # each once, in order
    assert len(lines) == 2 * per_writer  # nothing torn or merged
    assert oct(made[0].stat().st_mode & 0o777) == "0o600"


def test_a_copied_container_log_is_archived_under_its_writer(tmp_path: Path) -> None:
    """The docker runtime's copy (`AppendSink`) takes the same lock."""
    home = ChoirHome(tmp_path / "choir.d")
    home.logs.mkdir(parents=True)
    archiver = LiveLogArchiver(home)
    with AppendSink(home.agent_log("agent-1")) as sink:
        for n in range(30):
            sink.write(f"chunk {n}\n".encode())
            archiver.check(["agent-1"], 7)
    assert len(archived_logs(home, "agent-1")) == 3  # at 8, 16 and 24 lines
    assert everything(home, "agent-1") == [f"chunk {n}" for n in range(30)]


def test_below_the_threshold_or_at_0_nothing_is_archived(tmp_path: Path) -> None:
    home = ChoirHome(tmp_path / "choir.d")
    home.logs.mkdir(parents=True)
    home.agent_log("agent-1").write_text("one\ntwo\n")
    archiver = LiveLogArchiver(home)
    assert archiver.check(["agent-1", "agent-2"], 2) == []  # agent-2 has no log: fine
    assert archiver.check(["agent-1"], 0) == []
    assert archived_logs(home, "agent-1") == []
    home.agent_log("agent-1").write_text("one\ntwo\nthree\n")  # rewritten: counted afresh
    assert len(archiver.check(["agent-1"], 2)) == 1
    assert home.agent_log("agent-1").read_text() == ""
    # the exit's archive of an emptied log makes none, and removes the empty file
    assert archive_agent_log(home, "agent-1") is None
    assert not home.agent_log("agent-1").exists()


def test_line_counts_read_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    count = LineCount()
    assert count.update(path) == 0
    path.write_bytes(b"a\nb\n")
    assert count.update(path) == 2
    with path.open("ab") as out:
        out.write(b"c\nunfinished")
    assert count.update(path) == 3
    assert count.offset == path.stat().st_size
    path.write_bytes(b"z\n")  # truncated and rewritten
    assert count.update(path) == 1


def test_a_follower_reads_across_an_in_place_archive_even_when_the_file_regrew(
    tmp_path: Path,
) -> None:
    """`logs -f`'s reader: lines it had not reached are read from the archive, then the new
    file from its start — also when the new file is already longer than the old offset."""
    from choir.daemon.operator.logs import LogTail
    from choir.logs import last_archive

    home = ChoirHome(tmp_path / "choir.d")
    home.logs.mkdir(parents=True)
    log = home.agent_log("agent-1")
    with AppendSink(log) as sink:
        tail = LogTail(log, lambda: last_archive(home, "agent-1"))
        sink.write(b"one\ntwo\n")
        seen = [line for batch in tail.drain() for line in batch]
        sink.write(b"three\n")  # written, not yet read, when archived
        LiveLogArchiver(home).archive("agent-1")
        sink.write(b"four is a longer line than all before\nfive\n")  # past the old offset
        seen += [line for batch in tail.drain() for line in batch]
        LiveLogArchiver(home).archive("agent-1")  # one more, shorter this time
        sink.write(b"six\n")
        seen += [line for batch in tail.drain() for line in batch]
    tail.close()
    assert seen == ["one", "two", "three", "four is a longer line than all before", "five", "six"]
    assert tail.emptied == 2


def test_a_starved_follower_reads_every_archive_made_since_it_last_looked(
    tmp_path: Path,
) -> None:
    """Two in-place archives between two looks (a follower starved on a loaded host): what it
    had not reached is in the first archive, all of the second is new to it. Before, it read
    the newest archive from its old offset and lost lines (tests/runtime/test_log_archiving)."""
    from choir.daemon.operator.logs import LogTail
    from choir.logs import every_archive, last_archive

    home = ChoirHome(tmp_path / "choir.d")
    home.logs.mkdir(parents=True)
    log = home.agent_log("agent-1")
    with AppendSink(log) as sink:
        tail = LogTail(
            log, lambda: last_archive(home, "agent-1"), lambda: every_archive(home, "agent-1")
        )
        sink.write(b"one\n")
        seen = [line for batch in tail.drain() for line in batch]
        sink.write(b"two\n")
        LiveLogArchiver(home).archive("agent-1")
        sink.write(b"three\nfour\n")
        LiveLogArchiver(home).archive("agent-1")  # the second before the follower looked
        sink.write(b"five\n")
        seen += [line for batch in tail.drain() for line in batch]
    tail.close()
    assert seen == ["one", "two", "three", "four", "five"]
    assert len(every_archive(home, "agent-1")) == 2
