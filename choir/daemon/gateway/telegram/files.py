"""Which files a DM and its agent exchange, and how (§19.5): kinds, Bot API limits, safe names.

Pure rules, no I/O: `receive` downloads what a user sends into `.choirtmp/recv/`, `deliver`
uploads what the agent leaves in `.choirtmp/send/`; both ask here what a file is.

A user's file name is never a path: it is cut to its last component (after Unicode
normalisation, so a full-width slash is a slash), every character but letters, digits, `-`,
`_` and `.` becomes `_`, leading dots go (no hidden file, no `..`), and it is prefixed with the
bot and update id — unique per update, the same again when Telegram offers the update twice.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final, Literal

from telegram import Message

MB: Final = 1024 * 1024
DOWNLOAD_LIMIT: Final = 20 * MB
"""The cloud Bot API's `getFile` serves files up to 20 MB."""
UPLOAD_LIMIT: Final = 50 * MB
"""Bots upload files up to 50 MB."""
PHOTO_LIMIT: Final = 10 * MB
"""`sendPhoto` takes photos up to 10 MB (a larger image goes as a document)."""
NAME_CHARS: Final = 100
"""The longest stored name (the extension kept)."""

InboundKind = Literal["document", "photo", "voice", "audio", "video"]
SendMethod = Literal["photo", "voice", "video", "document"]

RECV: Final = ".choirtmp/recv"
SEND: Final = ".choirtmp/send"


@dataclass(frozen=True)
class Incoming:
    """A file a user sent: what it is and the name it is stored under (before its prefix)."""

    kind: InboundKind
    file_id: str
    size: int | None
    """As the update declares it (Telegram may leave it out)."""
    name: str
    mime: str | None


def incoming(message: Message) -> Incoming | None:
    """The file `message` carries (a photo at its largest size), or None (a sticker, a
    location, a poll…: nothing the agent could open)."""
    if (doc := message.document) is not None:
        name = safe_name(doc.file_name, "document" + _extension(doc.mime_type))
        return Incoming("document", doc.file_id, doc.file_size, name, doc.mime_type)
    if message.photo:
        photo = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        return Incoming("photo", photo.file_id, photo.file_size, "photo.jpg", "image/jpeg")
    if (voice := message.voice) is not None:
        mime = voice.mime_type or "audio/ogg"
        return Incoming("voice", voice.file_id, voice.file_size, "voice.ogg", mime)
    if (audio := message.audio) is not None:
        name = safe_name(audio.file_name, "audio" + _extension(audio.mime_type))
        return Incoming("audio", audio.file_id, audio.file_size, name, audio.mime_type)
    if (video := message.video) is not None:
        name = safe_name(video.file_name, "video.mp4")
        return Incoming("video", video.file_id, video.file_size, name, video.mime_type)
    if (note := message.video_note) is not None:  # a round video: an mp4 like any other
        return Incoming("video", note.file_id, note.file_size, "video-note.mp4", "video/mp4")
    return None


def safe_name(raw: str | None, fallback: str) -> str:
    """`raw` as one harmless file name (`fallback` when nothing of it is left)."""
    base = re.split(r"[/\\]", unicodedata.normalize("NFKC", raw or ""))[-1]
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in base).lstrip(".")
    if not cleaned.strip("_."):
        cleaned = fallback
    suffix = PurePosixPath(cleaned).suffix
    if len(suffix) > 12:
        suffix = ""
    stem = cleaned[: len(cleaned) - len(suffix)] if suffix else cleaned
    return stem[: NAME_CHARS - len(suffix)] + suffix


def stored_name(gateway: str, update_id: int, name: str) -> str:
    """The name in `.choirtmp/recv/`: one per update, the same when it is offered again."""
    return f"{safe_name(gateway, 'tg')}-{update_id}-{name}"


def attachment_text(file: Incoming, path: str, size: int, caption: str | None) -> str:
    """The message the agent gets: the caption (if any), then what arrived and where."""
    what = f"[{file.kind} received: {path} ({_mime(file)}, {size_text(size)})]"
    return f"{caption}\n\n{what}" if caption else what


def too_big_to_fetch(file: Incoming, size: int) -> str:
    return (
        f"That {file.kind} is {size_text(size)}: Telegram lets bots fetch files up to "
        f"{size_text(DOWNLOAD_LIMIT)}, so the agent did not get it. Send a smaller file, or "
        "put it somewhere the agent can fetch it and send the link."
    )


def send_method(name: str, size: int, head: bytes) -> SendMethod:
    """How a file of `.choirtmp/send/` goes out: by its extension, when its first bytes agree
    (a `.jpg` that is no JPEG would fail as a photo: it goes as a document)."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in (".jpg", ".jpeg", ".png", ".webp") and size <= PHOTO_LIMIT and _image(head):
        return "photo"
    if suffix in (".ogg", ".oga", ".opus") and head.startswith(b"OggS") and b"OpusHead" in head:
        return "voice"
    if suffix == ".mp4" and head[4:8] == b"ftyp":
        return "video"
    return "document"


def unsendable(size: int) -> str | None:
    """Why a file of `size` bytes cannot be uploaded at all, or None."""
    if size == 0:
        return "it is empty"
    if size > UPLOAD_LIMIT:
        return f"it is {size_text(size)} and bots upload at most {size_text(UPLOAD_LIMIT)}"
    return None


def outgoing_name(name: str) -> bool:
    """Whether a name in `.choirtmp/send/` is a finished file: hidden names and `.part`/`.tmp`
    ones are being written (write there, then rename — `choir.fs.write` does)."""
    return not name.startswith(".") and not name.endswith((".part", ".tmp", ".partial"))


def size_text(size: int) -> str:
    """`size` for a person, rounded up (a file one byte over a limit never reads as at it)."""
    for unit, scale in (("MB", MB), ("KB", 1024)):
        if size >= scale:
            return f"{math.ceil(size * 10 / scale) / 10:.1f} {unit}"
    return f"{size} bytes"


def _image(head: bytes) -> bool:
    jpeg_or_png = head.startswith((b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n"))
    return jpeg_or_png or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")


def _mime(file: Incoming) -> str:
    return file.mime or "application/octet-stream"


_EXTENSIONS: Final = {
    "application/pdf": ".pdf",
    "audio/mpeg": ".mp3",
    "audio/mp4": ".m4a",
    "audio/ogg": ".ogg",
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "text/plain": ".txt",
    "video/mp4": ".mp4",
}


def _extension(mime: str | None) -> str:
    return _EXTENSIONS.get(mime or "", "")
