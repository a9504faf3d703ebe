"""The email tools against real mail servers on loopback: `aiosmtpd` for SMTP and Dovecot for IMAP,
both requiring TLS with a certificate of their own (trusted as the account's `ca_cert`). Sending
with attachments from the workspace, listing and reading (HTML converted, attachments saved under
`.choirtmp/recv/`, never outside the workspace), checking for new mail, and every refusal an error
code the model can act on."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from email.message import EmailMessage
from pathlib import Path

import pytest

from choir.agent.integrations import mail
from choir.agent.integrations.mail import CheckInput, ReceiveInput, SendInput
from choir.agent.integrations.mail_text import html_text, safe_name
from choir.agent.kernel.workspace import Workspace
from choir.core.integrations import EmailAccess, MailServer, email_access
from tests.harness.mail import PASSWORD, USER, ImapServer, MailTls, SmtpServer, mail_servers

SECRET = f"{USER}:{PASSWORD}"

pytestmark = pytest.mark.slow


@pytest.fixture
def servers() -> Iterator[tuple[MailTls, SmtpServer, ImapServer]]:
    root = Path(tempfile.mkdtemp(prefix="choir-mail-"))
    os.chmod(root, 0o755)  # dovecot's own users read its config and the mail under it
    try:
        with mail_servers(root) as running:
            yield running
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace(root) as ws:
        ws.ensure_choirtmp()
        yield ws


def account(servers: tuple[MailTls, SmtpServer, ImapServer], **changes: object) -> EmailAccess:
    tls, smtp, imap = servers
    bound = {
        "email": {
            "smtp_host": "localhost",
            "smtp_port": smtp.port,
            "imap_host": "localhost",
            "imap_port": imap.imaps_port,
            "imap_security": "tls",
            "secret": "mail-creds",
            "ca_cert": tls.ca_pem,
        }
    }
    access = email_access(bound)
    assert access is not None
    return replace(access, **changes)  # type: ignore[arg-type]


def letter(
    subject: str, text: str, *, html: str | None = None, attach: bytes | None = None
) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Ada <ada@example.org>"
    message["To"] = USER
    message["Subject"] = subject
    message["Message-ID"] = f"<{subject.replace(' ', '-')}@example.org>"
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    if attach is not None:
        message.add_attachment(
            attach, maintype="application", subtype="pdf", filename="../../report.pdf"
        )
    return message


async def test_send_delivers_with_attachments_over_starttls(
    servers: tuple[MailTls, SmtpServer, ImapServer], workspace: Workspace
) -> None:
    (workspace.root / "notes.txt").write_text("the notes\n")
    call = SendInput(
        to=["bob@example.org"],
        cc=["carol@example.org"],
        bcc=["dave@example.org"],
        subject="Weekly notes",
        body="Here they are.",
        attachments=["notes.txt"],
        in_reply_to="<earlier@example.org>",
    )
    result = await mail.send(account(servers), SECRET, call, workspace, 10)
    assert result.status == "success", result
    [accepted] = servers[1].accepted
    assert accepted.sender == USER
    assert accepted.recipients == ["bob@example.org", "carol@example.org", "dave@example.org"]
    message = accepted.message
    assert (message["Subject"], message["In-Reply-To"]) == ("Weekly notes", "<earlier@example.org>")
    assert "Bcc" not in message
    assert "dave" not in str(message)
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "notes.txt"
    assert attachment.get_content() == b"the notes\n"


async def test_send_refusals_name_what_to_do(
    servers: tuple[MailTls, SmtpServer, ImapServer], workspace: Workspace
) -> None:
    call = SendInput(to=["bob@example.org"], subject="x")
    wrong = await mail.send(account(servers), f"{USER}:nope", call, workspace, 10)
    assert wrong.error_code == "auth_failed"
    assert "choirctl secret set mail-creds" in wrong.summary
    assert "nope" not in wrong.model_dump_json()

    untrusted = await mail.send(account(servers, ca_cert=None), SECRET, call, workspace, 10)
    assert untrusted.error_code == "tls_failed", untrusted

    escape = SendInput(to=["bob@example.org"], subject="x", attachments=["../etc/passwd"])
    outside = await mail.send(account(servers), SECRET, escape, workspace, 10)
    assert outside.error_code == "path_outside_workspace"

    malformed = await mail.send(account(servers), "no-colon", call, workspace, 10)
    assert malformed.error_code == "invalid_credentials"
    assert not servers[1].accepted


async def test_receive_lists_then_reads_one_saving_its_attachment(
    servers: tuple[MailTls, SmtpServer, ImapServer], workspace: Workspace
) -> None:
    imap = servers[2]
    imap.deliver(letter("old news", "seen before"), seen=True)
    imap.deliver(
        letter(
            "Quarterly report",
            "",
            html="<html><head><style>p{}</style></head><body><p>Numbers are <b>up</b>.</p>"
            "<ul><li>revenue</li><li>users</li></ul></body></html>",
            attach=b"%PDF-1.4 report",
        )
    )
    access = account(servers)

    listed = await mail.receive(access, SECRET, ReceiveInput(), workspace, 10)
    assert listed.status == "success", listed
    assert [m["subject"] for m in listed.data["messages"]] == ["Quarterly report", "old news"]
    unseen = await mail.receive(access, SECRET, ReceiveInput(unseen_only=True), workspace, 10)
    [newest] = unseen.data["messages"]
    assert newest["from"] == "Ada <ada@example.org>"

    checked = await mail.check(access, SECRET, CheckInput(), 10)
    assert checked.data["unread"] == 1
    assert checked.data["newest"] == [
        {"from": "Ada <ada@example.org>", "subject": "Quarterly report"}
    ]

    read = await mail.receive(
        access, SECRET, ReceiveInput(message_id=newest["message_id"]), workspace, 10
    )
    assert read.status == "success", read
    assert "Numbers are up." in read.data["text"]
    assert "- revenue" in read.data["text"]
    assert read.data["attachments"] == [".choirtmp/recv/report.pdf"]
    assert (workspace.root / ".choirtmp" / "recv" / "report.pdf").read_bytes() == b"%PDF-1.4 report"
    assert (await mail.check(access, SECRET, CheckInput(), 10)).data["unread"] == 0  # read now


async def test_receive_refusals_name_what_to_do(
    servers: tuple[MailTls, SmtpServer, ImapServer], workspace: Workspace
) -> None:
    access = account(servers)
    missing = await mail.receive(access, SECRET, ReceiveInput(folder="Nowhere"), workspace, 10)
    assert missing.error_code == "not_found"
    unknown = await mail.receive(access, SECRET, ReceiveInput(message_id="<nope@x>"), workspace, 10)
    assert unknown.error_code == "not_found"
    wrong = await mail.check(access, f"{USER}:nope", CheckInput(), 10)
    assert wrong.error_code == "auth_failed"
    starttls = replace(access, imap=MailServer("localhost", servers[2].imap_port, "starttls"))
    assert (await mail.check(starttls, SECRET, CheckInput(), 10)).status == "success"
    closed = replace(access, imap=MailServer("localhost", 9, "tls"))
    assert (await mail.check(closed, SECRET, CheckInput(), 5)).error_code == "unreachable"


def test_text_helpers() -> None:
    assert html_text("<p>a&amp;b</p><script>x()</script><br>c") == "a&b\n\nc"
    assert safe_name("../../etc/pass wd") == "pass_wd"
    assert safe_name("..") == "attachment"
