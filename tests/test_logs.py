"""Structured logs (§22.2): JSON lines, context binding, redaction, archiving — on real files."""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.home import ChoirHome
from choir.logs import (
    REDACTED,
    ArchivingFileHandler,
    archive_agent_log,
    archived_logs,
    bind_context,
    current_context,
    get_logger,
    log_path,
    read_log_lines,
    redact,
    redact_json,
    register_secrets,
    replace_secrets,
    set_context,
    setup_logging,
    shutdown_logging,
)
from choir.logs.formatter import JsonLinesFormatter, rfc3339_utc

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ARCHIVE_NAME = re.compile(r"\d{8}T\d{6}Z(_\d+)?\.log\.gz")
SECRET = "sk-live-4f9c2e7a1b"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Leave the root logger and the secret registry exactly as the test found them."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    shutdown_logging()
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)
    replace_secrets([])


@pytest.fixture
def home(tmp_path: Path) -> ChoirHome:
    return ChoirHome(tmp_path / "choir.d")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def lines_of(home: ChoirHome, source: str = "choird") -> list[dict[str, Any]]:
    shutdown_logging()
    return read_log_lines(log_path(home, source))


# --- format -----------------------------------------------------------------------------------


def test_line_carries_the_standard_keys_and_fields(home: ChoirHome) -> None:
    setup_logging(home, "choird")
    get_logger("choird.startup").info("postgres ready", fields={"dsn_host": "db", "port": 5432})

    [line] = lines_of(home)
    assert list(line)[:7] == [
        "timestamp",
        "level",
        "source",
        "session_id",
        "lane",
        "logger",
        "message",
    ]
    assert TIMESTAMP.fullmatch(str(line["timestamp"]))
    assert line["level"] == "INFO"
    assert line["source"] == "choird"
    assert line["session_id"] is None
    assert line["lane"] is None
    assert line["logger"] == "choird.startup"
    assert line["message"] == "postgres ready"
    assert line["dsn_host"] == "db"
    assert line["port"] == 5432


def test_timestamp_is_rfc3339_utc_with_milliseconds() -> None:
    assert rfc3339_utc(1_795_000_000.456) == "2026-11-18T11:06:40.456Z"
    assert rfc3339_utc(1_795_000_000.9994) == "2026-11-18T11:06:40.999Z"  # the same second
    assert rfc3339_utc(1_795_000_000.9996) == "2026-11-18T11:06:41.000Z"  # rounds to the next
    assert rfc3339_utc(1.001) == "1970-01-01T00:00:01.001Z"
    assert rfc3339_utc(59.9999) == "1970-01-01T00:01:00.000Z"


def test_percent_arguments_bound_fields_and_name_clashes(home: ChoirHome) -> None:
    setup_logging(home, "choird", level="DEBUG")
    log = get_logger("choird.gateway", gateway="main").bind(agent_id="alice")
    log.debug("%d messages queued", 3, fields={"level": "shadowed", "agent_id": "bob"})

    [line] = lines_of(home)
    assert line["message"] == "3 messages queued"
    assert line["level"] == "DEBUG"
    assert line["field_level"] == "shadowed"
    assert line["gateway"] == "main"
    assert line["agent_id"] == "bob"


def test_values_json_cannot_encode_keep_the_line(home: ChoirHome, tmp_path: Path) -> None:
    setup_logging(home, "choird")
    log = get_logger("choird.test")
    log.info("odd values", fields={"path": tmp_path, "tags": {"b", "a"}, 7: "int key"})
    log.info("too big", fields={"n": 2**70})

    odd, big = lines_of(home)
    assert odd["path"] == str(tmp_path)
    assert odd["tags"] == ["a", "b"]
    assert odd["7"] == "int key"
    assert big["n"] == str(2**70)
    assert big["message"] == "too big"


def test_level_filters_and_rejects_unknown_names(home: ChoirHome) -> None:
    setup_logging(home, "choird", level="warning")
    log = get_logger("choird.test")
    log.info("dropped")
    log.warning("kept")
    assert [line["message"] for line in lines_of(home)] == ["kept"]
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        setup_logging(home, "choird", level="LOUD")


def test_agent_source_writes_its_own_file(home: ChoirHome) -> None:
    setup_logging(home, "alice")
    get_logger("agent.runtime").info("booted")
    [line] = lines_of(home, "alice")
    assert line["source"] == "alice"
    assert not home.choird_log.exists()
    with pytest.raises(ValueError, match="log source"):
        setup_logging(home, "../escape")


def test_setup_again_replaces_its_handlers_and_keeps_others(home: ChoirHome) -> None:
    root = logging.getLogger()
    foreign = logging.NullHandler()
    root.addHandler(foreign)
    first = setup_logging(home, "choird")
    second = setup_logging(home, "choird")
    assert first not in root.handlers
    assert second in root.handlers
    assert foreign in root.handlers
    assert first.stream is None  # closed


def test_also_stderr_mirrors_the_same_lines(
    home: ChoirHome, capsys: pytest.CaptureFixture[str]
) -> None:
    register_secrets([SECRET])
    setup_logging(home, "choird", also_stderr=True)
    get_logger("choird.test").info(f"to both {SECRET}")
    err = capsys.readouterr().err
    [line] = lines_of(home)
    assert orjson.loads(err) == line
    assert SECRET not in err


# --- context ----------------------------------------------------------------------------------


async def test_each_asyncio_task_carries_its_own_session_and_lane(home: ChoirHome) -> None:
    setup_logging(home, "choird")
    log = get_logger("choird.sessions")

    async def lane(session_id: str, lane: str) -> None:
        set_context(session_id=session_id, lane=lane)
        for step in range(3):
            log.info(f"{session_id}/{lane} step {step}")
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as group:
        group.create_task(lane("s-1", "edge"))
        group.create_task(lane("s-1", "core"))
        group.create_task(lane("s-2", "edge"))
    log.info("outside")

    lines = lines_of(home)
    assert len(lines) == 10
    for line in lines[:-1]:
        assert str(line["message"]).startswith(f"{line['session_id']}/{line['lane']} ")
    assert [line["session_id"] for line in lines[:3]] == ["s-1", "s-1", "s-2"]
    assert (lines[-1]["session_id"], lines[-1]["lane"]) == (None, None)


async def test_bind_context_nests_restores_and_follows_to_thread(home: ChoirHome) -> None:
    setup_logging(home, "choird")
    log = get_logger("choird.rpc")
    with bind_context(session_id="s-9", agent_id="alice"):
        with bind_context(lane="core"):
            await asyncio.to_thread(log.info, "in a thread")
        log.info("lane unbound", fields={"agent_id": "override"})
    assert current_context().session_id is None

    threaded, outer = lines_of(home)
    assert (threaded["session_id"], threaded["lane"], threaded["agent_id"]) == (
        "s-9",
        "core",
        "alice",
    )
    assert (outer["session_id"], outer["lane"], outer["agent_id"]) == ("s-9", None, "override")


# --- exceptions -------------------------------------------------------------------------------


def test_exception_is_one_line_with_type_message_and_traceback(home: ChoirHome) -> None:
    setup_logging(home, "choird")
    empty: dict[str, int] = {}
    try:
        try:
            empty["missing"]
        except KeyError as cause:
            raise ValueError("bad\nthing") from cause
    except ValueError:
        get_logger("choird.test").exception("step failed", fields={"step": 4})

    raw = home.choird_log.read_bytes()
    assert raw.count(b"\n") == 1
    [line] = lines_of(home)
    exc = line["exc"]
    assert isinstance(exc, dict)
    assert exc["type"] == "ValueError"
    assert exc["message"] == "bad\nthing"
    assert "Traceback (most recent call last)" in exc["traceback"]
    assert "KeyError: 'missing'" in exc["traceback"]
    assert "The above exception was the direct cause" in exc["traceback"]
    assert line["level"] == "ERROR"
    assert line["step"] == 4


def test_stack_info_is_kept_on_the_line(home: ChoirHome) -> None:
    setup_logging(home, "choird")
    get_logger("choird.test").warning("where am I", stack_info=True)
    [line] = lines_of(home)
    assert "test_stack_info_is_kept_on_the_line" in str(line["stack"])


# --- redaction --------------------------------------------------------------------------------


def test_secret_never_reaches_the_file(home: ChoirHome) -> None:
    register_secrets([SECRET])
    setup_logging(home, "choird")
    log = get_logger("choird.secrets")
    log.info(f"token is {SECRET}")
    log.info("calling provider", fields={"headers": {"Authorization": f"Bearer {SECRET}"}})
    try:
        raise RuntimeError(f"provider rejected {SECRET}")
    except RuntimeError:
        log.exception("failed")

    shutdown_logging()
    raw = home.choird_log.read_bytes()
    assert SECRET.encode() not in raw
    assert raw.count(REDACTED.encode()) == 4  # message, field, exc message, traceback
    message, field, failure = read_log_lines(home.choird_log)
    assert message["message"] == f"token is {REDACTED}"
    assert field["headers"] == {"Authorization": f"Bearer {REDACTED}"}
    assert isinstance(failure["exc"], dict)
    assert failure["exc"]["message"] == f"provider rejected {REDACTED}"


def test_secret_with_json_special_characters_is_redacted(home: ChoirHome) -> None:
    secret = 'pa"ss\\wörd\n1'
    register_secrets([secret])
    setup_logging(home, "choird")
    get_logger("choird.test").info("x", fields={"value": f"<{secret}>", secret: 1})
    shutdown_logging()
    raw = home.choird_log.read_bytes()
    assert orjson.dumps(secret)[1:-1] not in raw
    [line] = read_log_lines(home.choird_log)
    assert line["value"] == f"<{REDACTED}>"
    assert line[REDACTED] == 1


def test_numeric_secret_outside_strings_keeps_valid_json() -> None:
    register_secrets(["987654"])
    formatter = JsonLinesFormatter("choird")
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "pin", None, None)
    record.fields = {"pin": 19876543, "other": 5}
    line = orjson.loads(formatter.format(record))
    assert line["pin"] == f"1{REDACTED}3"
    assert line["other"] == 5


def test_short_values_are_ignored_and_longest_secret_wins() -> None:
    register_secrets(["abc", "", "abcd", "abcdefgh"])
    assert redact("abc abcd abcdefgh abcdefghij") == f"abc {REDACTED} {REDACTED} {REDACTED}ij"


def test_replace_secrets_swaps_the_whole_set() -> None:
    register_secrets(["old-secret"])
    register_secrets(["second-secret"])
    assert redact("old-secret second-secret") == f"{REDACTED} {REDACTED}"
    replace_secrets(["new-secret"])
    assert redact("old-secret new-secret") == f"old-secret {REDACTED}"
    replace_secrets([])
    assert redact("new-secret") == "new-secret"


def test_line_without_secrets_is_returned_untouched() -> None:
    register_secrets([SECRET])
    line = '{"message":"nothing to see","n":1.50}'
    assert redact_json(line) is line


safe_text = st.text(st.characters(exclude_characters="[]", exclude_categories=["Cs"]))
# A secret without brackets that is no part of "REDACTED" cannot reappear through the marker.
secrets_text = safe_text.filter(lambda s: len(s) >= 4 and s not in REDACTED)


@given(secret=secrets_text, before=safe_text, after=safe_text)
def test_redacted_line_is_valid_json_without_the_secret(
    secret: str, before: str, after: str
) -> None:
    replace_secrets([secret])
    try:
        original = {"message": before + secret + after, "n": 12345, before: after}
        line = orjson.loads(redact_json(orjson.dumps(original).decode()))
        strings = [str(key) for key in line] + [str(value) for value in line.values()]
        assert all(secret not in text for text in strings)
    finally:
        replace_secrets([])


# --- archiving --------------------------------------------------------------------------------


def write_numbered(count: int, start: int = 0) -> None:
    log = get_logger("choird.test")
    for n in range(start, start + count):
        log.info("line", fields={"n": n})


def numbers(entries: list[dict[str, Any]]) -> list[int]:
    return [entry["n"] for entry in entries]


def test_rollover_past_threshold_loses_and_doubles_nothing(home: ChoirHome) -> None:
    handler = setup_logging(home, "choird", archive_threshold_lines=10)
    write_numbered(35)
    handler.wait_for_archives()

    archives = archived_logs(home, "choird")
    assert len(archives) == 3
    assert all(ARCHIVE_NAME.fullmatch(path.name) for path in archives)
    assert all(mode_of(path) == 0o600 for path in archives)
    archived = [entry for path in archives for entry in read_log_lines(path)]
    assert [len(read_log_lines(path)) for path in archives] == [10, 10, 10]
    assert numbers(archived) + numbers(lines_of(home)) == list(range(35))
    assert list((home.log_archive / "choird").glob("*.log")) == []  # nothing left staged


def test_rollover_under_concurrent_writers_keeps_every_line_once(home: ChoirHome) -> None:
    handler = setup_logging(home, "choird", archive_threshold_lines=7)
    log = get_logger("choird.test")

    def writer(thread: int) -> None:
        for n in range(50):
            log.info("line", fields={"n": thread * 1000 + n})

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handler.wait_for_archives()

    archives = archived_logs(home, "choird")
    written = [entry for path in archives for entry in read_log_lines(path)] + lines_of(home)
    assert sorted(numbers(written)) == sorted(t * 1000 + n for t in range(4) for n in range(50))
    assert len(archives) == 28  # 200 lines: 28 full archives of 7, 4 lines active


def test_line_count_survives_a_restart(home: ChoirHome) -> None:
    setup_logging(home, "choird", archive_threshold_lines=10)
    write_numbered(7)
    handler = setup_logging(home, "choird", archive_threshold_lines=10)
    assert handler.lines == 7
    write_numbered(5, start=7)
    handler.wait_for_archives()

    [archive] = archived_logs(home, "choird")
    assert numbers(read_log_lines(archive)) == list(range(10))
    assert numbers(lines_of(home)) == [10, 11]


def test_cut_off_last_line_does_not_swallow_the_next(home: ChoirHome) -> None:
    home.logs.mkdir(parents=True)
    home.choird_log.write_bytes(b'{"message":"whole"}\n{"message":"cut')
    handler = setup_logging(home, "choird")
    assert handler.lines == 2
    get_logger("choird.test").info("after restart")
    shutdown_logging()
    raw_lines = home.choird_log.read_bytes().splitlines()
    assert raw_lines[1] == b'{"message":"cut'
    assert orjson.loads(raw_lines[2])["message"] == "after restart"


def test_staged_archive_left_by_a_crash_is_finished_at_start(home: ChoirHome) -> None:
    folder = home.log_archive / "choird"
    folder.mkdir(parents=True)
    (folder / "20261126T010203Z.log").write_bytes(b'{"message":"before crash"}\n')
    setup_logging(home, "choird")

    [archive] = archived_logs(home, "choird")
    assert archive.name == "20261126T010203Z.log.gz"
    assert gzip.decompress(archive.read_bytes()) == b'{"message":"before crash"}\n'
    assert not (folder / "20261126T010203Z.log").exists()


def test_active_file_is_private_even_if_it_was_not(home: ChoirHome) -> None:
    home.logs.mkdir(parents=True)
    home.choird_log.touch(mode=0o644)
    home.choird_log.chmod(0o644)
    old_umask = os.umask(0)
    try:
        setup_logging(home, "choird")
        setup_logging(home, "alice")
    finally:
        os.umask(old_umask)
    assert mode_of(home.choird_log) == 0o600
    assert mode_of(home.agent_log("alice")) == 0o600


def test_negative_threshold_is_refused(home: ChoirHome) -> None:
    home.logs.mkdir(parents=True)
    with pytest.raises(ValueError, match="archive threshold"):
        ArchivingFileHandler(home.choird_log, home.log_archive / "choird", threshold=-1)


def test_agent_log_archived_at_session_end(home: ChoirHome) -> None:
    setup_logging(home, "alice")
    write_numbered(5)
    shutdown_logging()
    first = archive_agent_log(home, "alice")
    setup_logging(home, "alice")
    write_numbered(2, start=5)
    shutdown_logging()
    second = archive_agent_log(home, "alice")

    assert first is not None
    assert second is not None
    assert first.parent == second.parent == home.log_archive / "alice"
    assert archived_logs(home, "alice") == [first, second]  # same second: _1 sorts after
    assert ARCHIVE_NAME.fullmatch(second.name)
    assert mode_of(first) == 0o600
    assert numbers(read_log_lines(first)) == list(range(5))
    assert numbers(read_log_lines(second)) == [5, 6]
    assert not home.agent_log("alice").exists()
    assert archive_agent_log(home, "alice") is None


def test_empty_or_missing_agent_log_is_not_archived(home: ChoirHome) -> None:
    assert archive_agent_log(home, "bob") is None
    home.logs.mkdir(parents=True)
    home.agent_log("bob").touch()
    assert archive_agent_log(home, "bob") is None
    assert not home.agent_log("bob").exists()
    assert archived_logs(home, "bob") == []


def test_read_log_lines_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text('{"message":"ok"}\n\nnot json\n')
    with pytest.raises(ValueError, match=r"x\.log:3: not a JSON log line"):
        read_log_lines(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="must be a JSON object"):
        read_log_lines(path)
