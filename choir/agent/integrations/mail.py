"""The email tools (§8.7, §18.3): `choir.email.send` over SMTP, `receive` and `check` over IMAP,
with the bound account's credentials (`username:password` in its secret, read at each call).

SMTP through `aiosmtplib`; IMAP through the standard library's `imaplib`, in a thread with a
socket timeout. TLS is verified against the system's CAs plus the account's `ca_cert`, with the
host name checked; `none` (plain text) is the operator's explicit choice. Attachments to send
are read from the workspace, and received ones written to `.choirtmp/recv/`, both through
directories opened beneath the workspace root. Answers are bounded (`MAX_TEXT_CHARS` of a
message's text, `limit` messages), and failures are error codes the model can act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import os
import ssl
from collections.abc import Callable
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import getaddresses
from typing import Any, Final, TypeVar

import aiosmtplib
from pydantic import BaseModel, ConfigDict, Field

from choir.agent.integrations import mail_text
from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace
from choir.core.integrations import EmailAccess, MailServer
from choir.protocol.tooling.tools import ToolResult

SEND, RECEIVE, CHECK = "choir.email.send", "choir.email.receive", "choir.email.check"
RECV_DIR: Final = ".choirtmp/recv"
MAX_ATTACHMENT_BYTES: Final = 25 * 1024 * 1024
"""All attachments of one message, either way: what common mail servers accept."""
PREVIEW_MAX_BYTES: Final = 256 * 1024
"""Messages up to this size are read for a list's preview; larger ones are listed by header."""
NEWEST_IN_CHECK: Final = 5

T = TypeVar("T")


class SendInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    to: list[str] = Field(min_length=1)
    subject: str = Field(min_length=1)
    body: str = ""
    cc: list[str] = Field(default_factory=list)
    bcc: list[str] = Field(default_factory=list)
    attachments: list[str] = Field(default_factory=list)
    in_reply_to: str | None = None


class ReceiveInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    folder: str = "INBOX"
    message_id: str | None = None
    limit: int = Field(default=20, ge=1, le=100)
    unseen_only: bool = False


class CheckInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    folder: str = "INBOX"


class MailFailure(Exception):
    """A call that ends in `result` (raised from the blocking IMAP code)."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.summary)
        self.result = result


def tls_context(access: EmailAccess) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if access.ca_cert:
        context.load_verify_locations(cadata=access.ca_cert)
    return context


def login_of(access: EmailAccess, secret: str) -> tuple[str, str] | ToolResult:
    found = mail_text.credentials(secret)
    if found is None:
        return ToolResult.fail(
            "invalid_credentials",
            f"secret {access.secret!r} must be username:password: the operator sets it with "
            f"choirctl secret set {access.secret}",
        )
    return found


# -- send ------------------------------------------------------------------------------------


async def send(
    access: EmailAccess, secret: str, call: SendInput, workspace: Workspace, timeout_s: float
) -> ToolResult:
    login = login_of(access, secret)
    if isinstance(login, ToolResult):
        return login
    sender = access.address or (login[0] if "@" in login[0] else None)
    if sender is None:
        return ToolResult.fail(
            "invalid_config",
            "the bound email account has no From address: the operator sets "
            "email_accounts.<name>.address in config.json",
        )
    attachments = await asyncio.to_thread(_read_attachments, workspace, call.attachments)
    if isinstance(attachments, ToolResult):
        return attachments
    message = mail_text.compose(
        sender,
        to=call.to,
        cc=call.cc,
        subject=call.subject,
        body=call.body,
        attachments=attachments,
        in_reply_to=call.in_reply_to,
    )
    recipients = [address for _, address in getaddresses([*call.to, *call.cc, *call.bcc])]
    server = access.smtp
    try:
        await aiosmtplib.send(
            message,
            sender=sender,
            recipients=recipients,
            hostname=server.host,
            port=server.port,
            username=login[0],
            password=login[1],
            use_tls=server.security == "tls",
            start_tls=server.security == "starttls",
            tls_context=tls_context(access),
            timeout=timeout_s,
        )
    except aiosmtplib.SMTPAuthenticationError:
        return _auth_failed(access, "SMTP")
    except aiosmtplib.SMTPRecipientsRefused as refused:
        who = ", ".join(r.recipient for r in refused.recipients)
        return ToolResult.fail("recipients_refused", f"the mail server refused {who}")
    except aiosmtplib.SMTPTimeoutError:
        return ToolResult.fail("timeout", "the mail server did not answer in time")
    except aiosmtplib.SMTPResponseException as error:
        return ToolResult.fail(
            "provider_error", f"the mail server refused the message ({error.code} {error.message})"
        )
    except (aiosmtplib.SMTPException, OSError) as error:
        return _unreachable(server, "SMTP", error)
    names = [name for name, _ in attachments]
    return ToolResult.ok(
        f"sent {call.subject!r} to {len(recipients)} recipient(s)",
        message_id=message["Message-ID"],
        recipients=recipients,
        attachments=names,
    )


def _read_attachments(
    workspace: Workspace, paths: list[str]
) -> list[tuple[str, bytes]] | ToolResult:
    read: list[tuple[str, bytes]] = []
    total = 0
    for path in paths:
        try:
            data = workspace.read_bytes(path)
        except PathOutsideWorkspace as error:
            return ToolResult.fail("path_outside_workspace", error.message)
        except OSError as error:
            return ToolResult.fail("invalid_input", f"attachment {path}: {error.strerror}")
        total += len(data)
        if total > MAX_ATTACHMENT_BYTES:
            return ToolResult.fail(
                "too_large", f"attachments over {MAX_ATTACHMENT_BYTES // 2**20} MiB in all"
            )
        read.append((mail_text.safe_name(os.path.basename(path)), data))
    return read


# -- receive and check -----------------------------------------------------------------------


async def receive(
    access: EmailAccess, secret: str, call: ReceiveInput, workspace: Workspace, timeout_s: float
) -> ToolResult:
    login = login_of(access, secret)
    if isinstance(login, ToolResult):
        return login
    if call.message_id is None:
        return await _imap(access, login, timeout_s, lambda imap: _list(imap, call))
    message_id = call.message_id
    return await _imap(
        access, login, timeout_s, lambda imap: _read(imap, call, message_id, workspace)
    )


async def check(access: EmailAccess, secret: str, call: CheckInput, timeout_s: float) -> ToolResult:
    login = login_of(access, secret)
    if isinstance(login, ToolResult):
        return login
    return await _imap(access, login, timeout_s, lambda imap: _check(imap, call.folder))


async def _imap(
    access: EmailAccess,
    login: tuple[str, str],
    timeout_s: float,
    work: Callable[[imaplib.IMAP4], ToolResult],
) -> ToolResult:
    def run() -> ToolResult:
        imap = _connect(access, timeout_s)
        try:
            try:
                imap.login(*login)
            except imaplib.IMAP4.error:
                return _auth_failed(access, "IMAP")
            return work(imap)
        finally:
            with contextlib.suppress(imaplib.IMAP4.error, OSError):
                imap.logout()

    try:
        return await asyncio.to_thread(run)
    except MailFailure as failure:
        return failure.result
    except TimeoutError:
        return ToolResult.fail("timeout", "the mail server did not answer in time")
    except ssl.SSLError as error:
        return _unreachable(access.imap, "IMAP", error)
    except (imaplib.IMAP4.error, OSError) as error:
        return _unreachable(access.imap, "IMAP", error)


def _connect(access: EmailAccess, timeout_s: float) -> imaplib.IMAP4:
    server = access.imap
    if server.security == "tls":
        return imaplib.IMAP4_SSL(
            server.host, server.port, ssl_context=tls_context(access), timeout=timeout_s
        )
    imap = imaplib.IMAP4(server.host, server.port, timeout=timeout_s)
    if server.security == "starttls":
        imap.starttls(ssl_context=tls_context(access))
    return imap


def _select(imap: imaplib.IMAP4, folder: str, *, readonly: bool) -> None:
    status, _ = imap.select(_quoted(folder), readonly=readonly)
    if status != "OK":
        raise MailFailure(ToolResult.fail("not_found", f"there is no mail folder {folder!r}"))


def _search(imap: imaplib.IMAP4, *criteria: str) -> list[bytes]:
    status, data = imap.search(None, *criteria)
    return data[0].split() if status == "OK" and data and data[0] else []


def _check(imap: imaplib.IMAP4, folder: str) -> ToolResult:
    _select(imap, folder, readonly=True)
    unseen = _search(imap, "UNSEEN")
    newest = [_headers(imap, number) for number in unseen[-NEWEST_IN_CHECK:]][::-1]
    summary = f"{len(unseen)} unread in {folder}"
    return ToolResult.ok(
        summary,
        folder=folder,
        unread=len(unseen),
        newest=[{"from": h["from"], "subject": h["subject"]} for h in newest],
    )


def _list(imap: imaplib.IMAP4, call: ReceiveInput) -> ToolResult:
    _select(imap, call.folder, readonly=True)
    numbers = _search(imap, "UNSEEN" if call.unseen_only else "ALL")
    listed = []
    for number in numbers[-call.limit :][::-1]:
        headers = _headers(imap, number)
        size = _size(imap, number)
        if size <= PREVIEW_MAX_BYTES:
            headers["preview"] = mail_text.preview(
                mail_text.message_text(_fetch(imap, number, peek=True))
            )
        else:
            headers["preview"] = f"({size // 1024} KiB: read it by message_id)"
        listed.append(headers)
    which = "unread " if call.unseen_only else ""
    return ToolResult.ok(
        f"{len(listed)} of {len(numbers)} {which}messages in {call.folder}, newest first",
        folder=call.folder,
        messages=listed,
    )


def _read(
    imap: imaplib.IMAP4, call: ReceiveInput, message_id: str, workspace: Workspace
) -> ToolResult:
    _select(imap, call.folder, readonly=False)
    numbers = _search(imap, "HEADER", "Message-ID", _quoted(message_id))
    if not numbers:
        return ToolResult.fail(
            "not_found", f"no message {message_id} in {call.folder}: list them without message_id"
        )
    message = _fetch(imap, numbers[-1], peek=False)  # read in full: it is seen now
    text, truncated = mail_text.cut(mail_text.message_text(message))
    saved = [_save(workspace, name, data) for name, _, data in mail_text.attachments_of(message)]
    return ToolResult(
        status="success",
        summary=f"message {mail_text.headers_of(message)['subject']!r}"
        + (f" with {len(saved)} attachment(s) in {RECV_DIR}/" if saved else ""),
        data={**mail_text.headers_of(message), "text": text, "attachments": saved},
        truncated=truncated,
    )


def _headers(imap: imaplib.IMAP4, number: bytes) -> dict[str, str]:
    fields = "BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT DATE MESSAGE-ID)]"
    return mail_text.headers_of(_parse(_fetched(imap, number, fields)))


def _size(imap: imaplib.IMAP4, number: bytes) -> int:
    status, data = imap.fetch(number.decode(), "(RFC822.SIZE)")
    raw = data[0] if status == "OK" and data else b""
    found = raw.split(b"RFC822.SIZE ")[-1].rstrip(b")").strip() if isinstance(raw, bytes) else b""
    return int(found) if found.isdigit() else PREVIEW_MAX_BYTES + 1


def _fetch(imap: imaplib.IMAP4, number: bytes, *, peek: bool) -> EmailMessage:
    return _parse(_fetched(imap, number, "BODY.PEEK[]" if peek else "BODY[]"))


def _fetched(imap: imaplib.IMAP4, number: bytes, item: str) -> bytes:
    status, data = imap.fetch(number.decode(), f"({item})")
    for part in data if status == "OK" else []:
        if isinstance(part, tuple) and len(part) == 2 and isinstance(part[1], bytes):
            return part[1]
    return b""


def _parse(raw: bytes) -> EmailMessage:
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)  # policy.default makes EmailMessage
    return message


def _save(workspace: Workspace, name: str, data: bytes) -> str:
    """Write a received attachment under `.choirtmp/recv/` (a fresh name, never over a file);
    its workspace path."""
    folder = workspace.open_dir(RECV_DIR, create=True)
    try:
        stem, dot, suffix = mail_text.safe_name(name).rpartition(".")
        base = mail_text.safe_name(name)
        candidate, n = base, 1
        while True:
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=folder)
                break
            except FileExistsError:
                n += 1
                candidate = f"{stem}-{n}{dot}{suffix}" if dot else f"{base}-{n}"
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    finally:
        os.close(folder)
    return f"{RECV_DIR}/{candidate}"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _auth_failed(access: EmailAccess, protocol: str) -> ToolResult:
    return ToolResult.fail(
        "auth_failed",
        f"the {protocol} server refused the login in secret {access.secret!r}: the operator sets "
        f"the right username:password with choirctl secret set {access.secret}",
    )


def _unreachable(server: MailServer, protocol: str, error: Any) -> ToolResult:
    if isinstance(error, ssl.SSLCertVerificationError):
        return ToolResult.fail(
            "tls_failed",
            f"the {protocol} server {server.host}'s certificate is not trusted "
            f"({error.verify_message}): the operator adds its CA as the account's ca_cert",
        )
    detail = getattr(error, "strerror", None) or type(error).__name__
    return ToolResult.fail(
        "unreachable",
        f"the {protocol} server {server.host}:{server.port} cannot be reached ({detail})",
    )
