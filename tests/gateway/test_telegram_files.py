"""Files over Telegram end to end (§19.5): a real choird, a real agent (process runtime,
scripted model) and python-telegram-bot against the local Bot API server.

In: a user's photo, document, voice, audio or video lands in the agent's `.choirtmp/recv/`
and the agent's message names it. Out: what the agent leaves in `.choirtmp/send/` goes to the
chat as a photo, voice message, video or document, then is removed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from tests.harness.botapi import MB, BotApiServer
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config
from tests.harness.waits import poll_until

from .conftest import PHONE, TOKEN

pytestmark = pytest.mark.slow

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
OPUS = b"OggS\x00\x02" + bytes(22) + b"OpusHead\x01\x02" + bytes(40)
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(80)
REPORT = "quarterly numbers: all up\n"


@pytest.fixture
def script() -> Script:
    return Script(
        steps=[
            ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
            ReplyStep(
                match_regex=r"\[(\w+) received: (\S+) \(([^)]*)\)\]",
                templated=True,
                repeat=True,
                text="got a {1} at {2} ({3})",
            ),
            ToolCallsStep(
                match="write the report",
                calls=[
                    ScriptedCall(
                        name="choir.fs.write",
                        arguments={
                            "path": ".choirtmp/send/report.txt",
                            "op": "overwrite",
                            "content": REPORT,
                        },
                    )
                ],
            ),
            ReplyStep(after="tool", match="report.txt", text="The report is on its way."),
            ReplyStep(repeat=True, text="I only echo."),
        ]
    )


@pytest.fixture
async def choird(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        yield daemon, client


@pytest.fixture
async def agent(choird: tuple[ChoirDaemon, ChoirClient]) -> AsyncIterator[ChoirClient]:
    """agent-1 running, bound to the DM `phone`."""
    _, client = choird
    await client.agent_start("agent-1", {"dm": "phone"})
    yield client
    await client.agent_stop("agent-1")


@pytest.fixture
def workspace(home: ChoirHome) -> Path:
    """agent-1's workspace on the host (its /workspace)."""
    data = read_config(home)
    name = data["agents"]["agent-1"]["defaults"]["workspace"]
    return Path(data["workspaces"][name]["path"])


def recv(workspace: Path) -> dict[str, bytes]:
    folder = workspace / ".choirtmp" / "recv"
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def send_folder(workspace: Path) -> Path:
    return workspace / ".choirtmp" / "send"


async def gone(path: Path, within: float = 10) -> None:
    await poll_until(lambda: not os.path.lexists(path), within=within)


async def test_a_photo_and_a_document_land_in_recv_and_the_agent_is_told_where(
    agent: ChoirClient, api: BotApiServer, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the file URL carries the token: never in a log line
    photo = PNG + b"the big one"
    update = api.user_sends(PHONE, "photo", photo, caption="what is this?")
    [reply] = await api.wait_sent(PHONE, 1, within=30)
    name = f"tg-{update}-photo.jpg"
    assert reply.text == f"got a photo at .choirtmp/recv/{name} (image/jpeg, {len(photo)} bytes)"
    assert recv(workspace) == {name: photo}  # the largest size, not the thumbnail
    assert api.downloads == ["photos/file_0"]

    api.fail("getFile", 502)  # the update is tried again, and the file fetched then
    update = api.user_sends(
        PHONE, "document", b"%PDF-1.7 minutes", file_name="minutes.pdf", mime_type="application/pdf"
    )
    [_, reply] = await api.wait_sent(PHONE, 2, within=30)
    name = f"tg-{update}-minutes.pdf"
    assert reply.text == f"got a document at .choirtmp/recv/{name} (application/pdf, 16 bytes)"
    assert recv(workspace)[name] == b"%PDF-1.7 minutes"

    sent = (("voice", OPUS), ("audio", b"ID3 tune"), ("video", MP4), ("video_note", MP4 + b"o"))
    for kind, content in sent:
        api.user_sends(PHONE, kind, content)
    replies = [m.text for m in await api.wait_sent(PHONE, 6, within=30)][2:]
    assert [r.split(" at ")[0] for r in replies] == [
        "got a voice", "got a audio", "got a video", "got a video"
    ]  # fmt: skip
    assert replies[3].endswith("-video-note.mp4 (video/mp4, 93 bytes)")
    assert sorted(content for content in recv(workspace).values()) == sorted(
        [photo, b"%PDF-1.7 minutes", OPUS, b"ID3 tune", MP4, MP4 + b"o"]
    )
    assert all(TOKEN not in str(record.__dict__) for record in caplog.records)


@pytest.mark.parametrize(
    "hostile",
    ["../../../../etc/cron.d/evil", "..\\..\\evil.sh", "\uff0e\uff0e\uff0fescape", "..", "/"],
)
async def test_a_users_file_name_never_leaves_recv(
    agent: ChoirClient, api: BotApiServer, workspace: Path, hostile: str
) -> None:
    update = api.user_sends(PHONE, "document", b"payload", file_name=hostile)
    [reply] = await api.wait_sent(PHONE, 1, within=30)
    [(name, content)] = recv(workspace).items()
    assert content == b"payload"
    assert name.startswith(f"tg-{update}-")
    assert not set(name) & {"/", "\\"}
    assert ".." not in name
    assert f".choirtmp/recv/{name} " in reply.text
    outside = [p for p in workspace.parent.rglob("*") if p.name.endswith(("evil", "evil.sh"))]
    assert [p.parent for p in outside] == [workspace / ".choirtmp" / "recv"] * len(outside)


async def test_a_file_over_the_download_limit_is_refused_with_a_clear_reply(
    agent: ChoirClient, api: BotApiServer, workspace: Path
) -> None:
    big = bytes(20 * MB + 1)
    api.user_sends(PHONE, "document", big, file_name="huge.bin")
    [refused] = await api.wait_sent(PHONE, 1, within=30)
    assert refused.text.startswith(
        "That document is 20.1 MB: Telegram lets bots fetch files up to 20.0 MB, so the agent "
        "did not get it."
    )
    assert [c for c in api.calls if c.method == "getFile"] == []  # refused before any download

    # an update that does not say the size: getFile says it (as Telegram does)
    api.user_sends(PHONE, "video", big, size_known=False)
    [_, again] = await api.wait_sent(PHONE, 2, within=30)
    assert again.text.startswith("That video is ")
    assert "bots fetch files up to 20.0 MB" in again.text
    assert recv(workspace) == {}
    assert api.downloads == []
    assert "I only echo." not in api.texts(PHONE)  # the agent heard of none of it


async def test_what_the_agent_writes_to_send_goes_out_by_type_and_is_removed(
    agent: ChoirClient, api: BotApiServer, workspace: Path
) -> None:
    api.user_says(PHONE, "please write the report")  # the agent's own tool writes it
    [upload] = await api.wait_uploads(PHONE, 1, within=30)
    assert (upload.method, upload.filename, upload.content) == (
        "sendDocument",
        "report.txt",
        REPORT.encode(),
    )
    await gone(send_folder(workspace) / "report.txt")
    assert "The report is on its way." in api.texts(PHONE)

    files = {
        "chart.png": PNG,
        "hello.ogg": OPUS,
        "clip.mp4": MP4,
        "fake.jpg": b"not a jpeg at all",  # a photo Telegram would refuse: goes as a document
        "notes.ogg": b"OggS" + bytes(40),  # Ogg, not Opus: no voice message
    }
    api.fail("sendPhoto", 500)  # tried again after a second
    for name, content in files.items():
        (send_folder(workspace) / name).write_bytes(content)
    uploads = await api.wait_uploads(PHONE, 6, within=30)
    got = {u.filename: (u.method, u.content) for u in uploads[1:]}
    assert got == {
        "chart.png": ("sendPhoto", PNG),
        "hello.ogg": ("sendVoice", OPUS),
        "clip.mp4": ("sendVideo", MP4),
        "fake.jpg": ("sendDocument", b"not a jpeg at all"),
        "notes.ogg": ("sendDocument", b"OggS" + bytes(40)),
    }
    for name in files:
        await gone(send_folder(workspace) / name)


async def test_a_file_is_sent_only_once_written_and_closed(
    agent: ChoirClient, api: BotApiServer, workspace: Path
) -> None:
    folder = send_folder(workspace)
    with (folder / "log.txt").open("wb") as writer:
        writer.write(b"first half ")
        writer.flush()
        (folder / ".draft.txt").write_bytes(b"hidden while written")
        (folder / "draft.txt.part").write_bytes(b"being written")
        await asyncio.sleep(3)  # steady for longer than the settle time, but still open
        assert api.uploads(PHONE) == []
        writer.write(b"second half")
    [upload] = await api.wait_uploads(PHONE, 1, within=30)
    assert (upload.filename, upload.content) == ("log.txt", b"first half second half")

    (folder / "draft.txt.part").rename(folder / "draft.txt")  # write, then rename: sent
    [_, renamed] = await api.wait_uploads(PHONE, 2, within=30)
    assert (renamed.filename, renamed.content) == ("draft.txt", b"being written")
    await asyncio.sleep(2)
    assert len(api.uploads(PHONE)) == 2
    assert (folder / ".draft.txt").read_bytes() == b"hidden while written"


async def test_links_in_send_are_never_followed(
    agent: ChoirClient, api: BotApiServer, workspace: Path, root: Path
) -> None:
    api.user_says(PHONE, "hello")  # the agent has set its workspace up (it checks .choirtmp)
    await api.wait_sent(PHONE, 1, within=30)
    secret = root / "host-secret.txt"
    secret.write_text("host only")
    folder = send_folder(workspace)
    (folder / "secret.txt").symlink_to(secret)
    os.mkfifo(folder / "pipe.jpg")
    (folder / "ok.txt").write_text("fine")
    [upload] = await api.wait_uploads(PHONE, 1, within=30)
    assert upload.filename == "ok.txt"

    # the agent swaps the whole folder for a link to a host directory: nothing is read there
    outside = root / "host-dir"
    outside.mkdir()
    (outside / "private.txt").write_text("host only")
    folder.rename(workspace / ".choirtmp" / "send-old")
    folder.symlink_to(outside)
    await asyncio.sleep(4)
    assert [u.filename for u in api.uploads(PHONE)] == ["ok.txt"]
    assert secret.read_text() == "host only"
    assert (outside / "private.txt").read_text() == "host only"
    folder.unlink()  # the agent puts its folder back
    (workspace / ".choirtmp" / "send-old").rename(folder)


async def test_a_file_that_fails_is_reported_kept_and_not_retried_until_written_again(
    agent: ChoirClient, api: BotApiServer, workspace: Path
) -> None:
    folder = send_folder(workspace)
    api.fail("sendDocument", 400, "Bad Request: wrong file identifier")
    (folder / "data.csv").write_text("a,b\n")
    [told] = await api.wait_sent(PHONE, 1, within=30)
    assert told.text == (
        "data.csv could not be sent (BadRequest: Wrong file identifier). It stays in the "
        "agent's .choirtmp/send/ folder; write it again to retry."
    )
    with (folder / "huge.bin").open("wb") as sparse:  # over the upload limit: never tried
        sparse.truncate(50 * MB + 1)
    [_, too_big] = await api.wait_sent(PHONE, 2, within=30)
    assert too_big.text.startswith(
        "huge.bin was not sent: it is 50.1 MB and bots upload at most 50.0 MB."
    )
    await asyncio.sleep(3)
    assert len([c for c in api.calls if c.method == "sendDocument"]) == 1
    assert (folder / "data.csv").read_text() == "a,b\n"
    assert (folder / "huge.bin").exists()

    (folder / "data.csv").write_text("a,b\n1,2\n")  # written again: a new try
    [upload] = await api.wait_uploads(PHONE, 1, within=30)
    assert upload.content == b"a,b\n1,2\n"
    await gone(folder / "data.csv")

    api.fail("sendVideo", 400, "Bad Request: VIDEO_CONTENT_TYPE_INVALID")
    (folder / "clip.mp4").write_bytes(MP4)  # refused as a video: goes as a document
    [_, clip] = await api.wait_uploads(PHONE, 2, within=30)
    assert (clip.method, clip.filename, clip.content) == ("sendDocument", "clip.mp4", MP4)
    assert len(api.texts(PHONE)) == 2  # nothing more to report


async def test_files_of_an_agent_on_another_channel_are_left_alone(
    choird: tuple[ChoirDaemon, ChoirClient], api: BotApiServer, root: Path
) -> None:
    _, client = choird
    workspace = root / "ws-other"  # agent-2's, bound to the console DM `ops`
    workspace.mkdir()
    await client.agent_start("agent-2")
    try:
        (send_folder(workspace) / "for-the-console.txt").write_text("not for Telegram")
        await asyncio.sleep(4)
        assert [c.method for c in api.calls if c.method.startswith("send")] == []
        assert (send_folder(workspace) / "for-the-console.txt").exists()
    finally:
        await client.agent_stop("agent-2")


async def test_a_choird_stopped_mid_upload_keeps_the_file_and_the_next_sends_it_once(
    home: ChoirHome, api: BotApiServer, workspace: Path
) -> None:
    folder = send_folder(workspace)
    api.hold("sendDocument")  # Telegram takes the upload and does not answer
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        (folder / "minutes.txt").write_text("the minutes")
        await api.wait_for(lambda: any(c.method == "sendDocument" for c in api.calls), within=30)
        await client.agent_stop("agent-1")
    assert (folder / "minutes.txt").read_text() == "the minutes"  # nothing half-done
    held = len([c for c in api.calls if c.method == "sendDocument"])
    api.fail("sendDocument", 500, count=held)  # the held uploads never completed
    api.release("sendDocument")
    assert api.uploads(PHONE) == []

    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        [upload] = await api.wait_uploads(PHONE, 1, within=30)
        assert (upload.filename, upload.content) == ("minutes.txt", b"the minutes")
        await gone(folder / "minutes.txt")
        await asyncio.sleep(2)
        assert len(api.uploads(PHONE)) == 1
        await client.agent_stop("agent-1")
