"""Mail as data and text, for the email tools: credentials, composing, reading, names. Pure.

Messages are the standard library's `EmailMessage` under `email.policy.default`, which decodes
encoded words and charsets; HTML-only mail is read as text by `html_text` (tags dropped, blocks
and line breaks kept, scripts and styles left out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from html import unescape
from html.parser import HTMLParser
from typing import Any, Final

MAX_TEXT_CHARS: Final = 50_000
"""A message's text in one answer; past it the text is cut and the answer says so."""
PREVIEW_CHARS: Final = 200
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def credentials(value: str) -> tuple[str, str] | None:
    """(username, password) of a `username:password` secret; None when it has no colon."""
    username, colon, password = value.partition(":")
    return (username, password) if colon and username else None


def compose(
    sender: str,
    *,
    to: Sequence[str],
    cc: Sequence[str],
    subject: str,
    body: str,
    attachments: Iterable[tuple[str, bytes]],
    in_reply_to: str | None,
) -> EmailMessage:
    """A plain-text message with its attachments (Bcc goes in the envelope only, never here)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(to)
    if cc:
        message["Cc"] = ", ".join(cc)
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    if in_reply_to:
        message["In-Reply-To"] = in_reply_to
        message["References"] = in_reply_to
    message.set_content(body or "")
    for name, data in attachments:
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message


def headers_of(message: EmailMessage) -> dict[str, str]:
    """From, To, Subject, Date and Message-ID, decoded ("" when missing)."""
    return {
        key: str(message.get(header, "") or "")
        for key, header in (
            ("from", "From"),
            ("to", "To"),
            ("subject", "Subject"),
            ("date", "Date"),
            ("message_id", "Message-ID"),
        )
    }


def message_text(message: EmailMessage) -> str:
    """The message's text: its plain part, else (none, or blank) its HTML part as text."""
    plain = message.get_body(preferencelist=("plain",))
    text = _content(plain).strip() if plain is not None else ""
    if text:
        return text
    html = message.get_body(preferencelist=("html",))
    return html_text(_content(html)) if html is not None else ""


def attachments_of(message: EmailMessage) -> list[tuple[str, str, bytes]]:
    """(file name, content type, bytes) of each attachment."""
    found = []
    for part in message.iter_attachments():
        if not isinstance(part, EmailMessage):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        found.append((part.get_filename() or "attachment", part.get_content_type(), data))
    return found


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> tuple[str, bool]:
    """`text` up to `limit` characters, and whether it was cut."""
    return (text, False) if len(text) <= limit else (text[:limit], True)


def safe_name(name: str) -> str:
    """A file name from a sender's attachment name: no directories, no odd characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).strip("._") or "attachment"
    return cleaned[:100]


def html_text(html: str) -> str:
    """HTML as readable text."""
    reader = _HtmlText()
    reader.feed(html)
    reader.close()
    lines = [" ".join(line.split()) for line in "".join(reader.parts).splitlines()]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


class _HtmlText(HTMLParser):
    _BLOCKS: Final = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol"}
    )
    _SKIP: Final = frozenset({"script", "style", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n- " if tag == "li" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(unescape(data))


def _content(part: Any) -> str:
    try:
        content = part.get_content()
    except (LookupError, UnicodeDecodeError):  # an unknown charset: decode what can be read
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""
