"""The rules of files over Telegram (`files`) and choird's confined hands in `.choirtmp/`
(`staging`), on a real filesystem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.daemon.gateway.telegram import staging
from choir.daemon.gateway.telegram.files import (
    MB,
    NAME_CHARS,
    PHOTO_LIMIT,
    UPLOAD_LIMIT,
    outgoing_name,
    safe_name,
    send_method,
    size_text,
    unsendable,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\x00"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF"
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 "
OPUS = b"OggS\x00\x02" + bytes(22) + b"OpusHead"
MP4 = b"\x00\x00\x00\x18ftypmp42"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("\uff0e\uff0e\uff0fsecret", "secret"),  # full-width dots and slash
        ("..", "document"),
        ("", "document"),
        (None, "document"),
        (".bashrc", "bashrc"),
        ("a b;rm -rf $HOME.txt", "a_b_rm_-rf__HOME.txt"),
        ("Отчёт.docx", "Отчёт.docx"),
        ("line\nbreak\x00.txt", "line_break_.txt"),
        ("x" * 300 + ".tar.gz", "x" * (NAME_CHARS - 3) + ".gz"),
    ],
)
def test_a_users_file_name_becomes_one_harmless_name(raw: str | None, expected: str) -> None:
    assert safe_name(raw, "document") == expected


@given(st.text())
def test_no_name_is_a_path_hidden_or_too_long(raw: str) -> None:
    name = safe_name(raw, "document")
    assert name
    assert not set(name) & {"/", "\\", "\x00"}
    assert not name.startswith(".")
    assert len(name) <= NAME_CHARS


@pytest.mark.parametrize(
    ("name", "size", "head", "method"),
    [
        ("chart.png", 100, PNG, "photo"),
        ("photo.JPG", 100, JPEG, "photo"),
        ("sticker.webp", 100, WEBP, "photo"),
        ("poster.png", PHOTO_LIMIT + 1, PNG, "document"),  # too big for a photo
        ("fake.jpg", 100, b"plain text", "document"),
        ("hello.ogg", 100, OPUS, "voice"),
        ("hello.oga", 100, OPUS, "voice"),
        ("vorbis.ogg", 100, b"OggS" + bytes(40), "document"),
        ("clip.mp4", 100, MP4, "video"),
        ("clip.mov", 100, MP4, "document"),
        ("notes.txt", 100, b"notes", "document"),
        ("chart.png.txt", 100, PNG, "document"),
    ],
)
def test_a_file_goes_out_by_its_extension_when_its_bytes_agree(
    name: str, size: int, head: bytes, method: str
) -> None:
    assert send_method(name, size, head) == method


def test_empty_and_oversize_files_are_not_uploaded() -> None:
    assert unsendable(0) == "it is empty"
    assert unsendable(UPLOAD_LIMIT) is None
    assert unsendable(UPLOAD_LIMIT + 1) == "it is 50.1 MB and bots upload at most 50.0 MB"


@pytest.mark.parametrize(
    ("name", "finished"),
    [("a.txt", True), (".a.txt", False), ("a.txt.part", False), ("a.tmp", False),
     (".choir-write-0a1b2c.tmp", False), ("a.partial", False), ("part", True)],
)  # fmt: skip
def test_hidden_and_part_names_are_still_being_written(name: str, finished: bool) -> None:
    assert outgoing_name(name) is finished


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 bytes"), (1023, "1023 bytes"), (1024, "1.0 KB"), (1025, "1.1 KB"), (MB, "1.0 MB"),
     (20 * MB + 1, "20.1 MB")],
)  # fmt: skip
def test_sizes_read_rounded_up(size: int, text: str) -> None:
    assert size_text(size) == text


def scratch_dirs(workspace: Path) -> None:
    for sub in ("send", "recv"):
        (workspace / ".choirtmp" / sub).mkdir(parents=True)


def test_a_stored_file_is_never_overwritten_and_leaves_no_temporary(tmp_path: Path) -> None:
    scratch_dirs(tmp_path)
    recv = tmp_path / ".choirtmp" / "recv"
    assert staging.store(tmp_path, "tg-1-a.txt", b"first")
    assert not staging.store(tmp_path, "tg-1-a.txt", b"second")
    assert (recv / "tg-1-a.txt").read_bytes() == b"first"
    assert os.listdir(recv) == ["tg-1-a.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root choird hands files over")
def test_a_stored_file_belongs_to_the_owner_of_the_folder(tmp_path: Path) -> None:
    scratch_dirs(tmp_path)
    recv = tmp_path / ".choirtmp" / "recv"
    os.chown(recv, 12345, 12346)  # the agent's uid, as the Docker runtime hands it over
    staging.store(tmp_path, "tg-1-a.txt", b"x")
    owner = (recv / "tg-1-a.txt").stat()
    assert (owner.st_uid, owner.st_gid) == (12345, 12346)


def test_a_linked_recv_folder_is_refused(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    (workspace / ".choirtmp").mkdir(parents=True)
    (workspace / ".choirtmp" / "recv").symlink_to(outside)
    with pytest.raises(OSError, match=r"Too many levels of symbolic links|Not a directory"):
        staging.store(workspace, "tg-1-a.txt", b"x")
    assert list(outside.iterdir()) == []


def test_send_lists_regular_finished_files_only(tmp_path: Path) -> None:
    scratch_dirs(tmp_path)
    send = tmp_path / ".choirtmp" / "send"
    (send / "ok.txt").write_text("ok")
    (send / ".hidden").write_text("no")
    (send / "x.part").write_text("no")
    (send / "dir").mkdir()
    (send / "link.txt").symlink_to(send / "ok.txt")
    os.mkfifo(send / "pipe.jpg")
    assert list(staging.outgoing(tmp_path)) == ["ok.txt"]


def test_a_file_open_for_writing_is_being_written(tmp_path: Path) -> None:
    scratch_dirs(tmp_path)
    path = tmp_path / ".choirtmp" / "send" / "log.txt"
    with path.open("w") as writer:
        writer.write("half")
        writer.flush()
        assert staging.being_written(tmp_path, "log.txt")
    assert not staging.being_written(tmp_path, "log.txt")


LEASE_BROKEN = """
import fcntl, os, subprocess, sys, time
from choir.daemon.gateway.telegram.staging import take_lease
path = sys.argv[1]
fd = os.open(path, os.O_RDONLY)
take_lease(fd)
writer = subprocess.Popen([sys.executable, "-c", f"open({path!r}, 'a').write('more')"])
time.sleep(0.3)  # the writer's open waits on the lease: the kernel signals its holder
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
writer.wait(10)
print("still here")
"""


def test_a_writer_opening_the_file_during_the_lease_probe_does_not_end_choird(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("some")
    done = subprocess.run(
        [sys.executable, "-c", LEASE_BROKEN, str(path)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "still here\n")
    assert path.read_text() == "somemore"


def test_a_file_changed_after_its_stamp_is_neither_read_nor_removed(tmp_path: Path) -> None:
    scratch_dirs(tmp_path)
    path = tmp_path / ".choirtmp" / "send" / "a.txt"
    path.write_text("one")
    stamp = staging.outgoing(tmp_path)["a.txt"]
    assert staging.read(tmp_path, "a.txt", stamp) == b"one"
    path.write_text("three")
    with pytest.raises(staging.Changed):
        staging.read(tmp_path, "a.txt", stamp)
    assert not staging.remove(tmp_path, "a.txt", stamp)
    assert path.read_text() == "three"
    assert staging.remove(tmp_path, "a.txt", staging.outgoing(tmp_path)["a.txt"])
    assert not path.exists()
