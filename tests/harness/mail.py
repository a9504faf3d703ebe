"""Local mail servers for the email tools: SMTP by `aiosmtpd`, IMAP by Debian's Dovecot, both on
loopback, both demanding TLS (STARTTLS, or implicit TLS on the IMAPS port) before a login, both
with a certificate of their own (`MailTls`: a self-signed one, trusted as the account's
`ca_cert`).

`SmtpServer` records each accepted message (envelope and parsed message). `ImapServer` runs a
real `dovecot -F` with a config of its own in a temporary directory (its users: one, with a
plain-text password; mail in a Maildir the test fills with `deliver`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from choir.transport.tls import create_self_signed, server_context

USER, PASSWORD = "agent@mail.test", "mail-pass-3c9e"
MAIL_UID = pwd.getpwnam("nobody")


@dataclass(frozen=True)
class MailTls:
    cert: Path
    key: Path

    @classmethod
    def create(cls, folder: Path) -> MailTls:
        tls = cls(folder / "mail-cert.pem", folder / "mail-key.pem")
        create_self_signed(tls.cert, tls.key, names=("localhost", "127.0.0.1"))
        return tls

    @property
    def ca_pem(self) -> str:
        return self.cert.read_text()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Accepted:
    sender: str
    recipients: list[str]
    message: EmailMessage


@dataclass
class SmtpServer:
    tls: MailTls
    accepted: list[Accepted] = field(default_factory=list)
    port: int = 0
    _controller: Controller | None = None

    def __enter__(self) -> SmtpServer:
        self.port = free_port()
        self._controller = Controller(
            self,
            hostname="127.0.0.1",
            port=self.port,
            tls_context=server_context(self.tls.cert, self.tls.key),
            require_starttls=True,
            auth_required=True,
            authenticator=self._authenticate,
        )
        self._controller.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._controller is not None:
            self._controller.stop()

    def _authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == USER
            and data.password.decode() == PASSWORD
        )
        return AuthResult(success=ok, handled=False)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.accepted.append(Accepted(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"


DOVECOT_CONF = """
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = yes
auth_mechanisms = plain login
default_internal_user = dovecot
default_login_user = dovenull
first_valid_uid = 1
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


@dataclass
class ImapServer:
    root: Path
    tls: MailTls
    imap_port: int = 0
    imaps_port: int = 0
    _process: subprocess.Popen[bytes] | None = None

    @property
    def maildir(self) -> Path:
        return self.root / "mail" / USER

    def __enter__(self) -> ImapServer:
        dovecot = shutil.which("dovecot") or "/usr/sbin/dovecot"
        if not Path(dovecot).exists():
            raise RuntimeError("dovecot is not installed: apt-get install dovecot-imapd")
        self.imap_port, self.imaps_port = free_port(), free_port()
        for sub in ("run", "state", "mail"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
        for box in ("cur", "new", "tmp"):
            (self.maildir / box).mkdir(parents=True, exist_ok=True)
        for path in [self.root / "mail", self.maildir, *self.maildir.iterdir()]:
            os.chown(path, MAIL_UID.pw_uid, MAIL_UID.pw_gid)
        conf = self.root / "dovecot.conf"
        conf.write_text(
            DOVECOT_CONF.format(
                root=self.root,
                cert=self.tls.cert,
                key=self.tls.key,
                uid=MAIL_UID.pw_uid,
                gid=MAIL_UID.pw_gid,
                imap_port=self.imap_port,
                imaps_port=self.imaps_port,
            )
        )
        # dovecot reads the key as root at start; its login processes never see it
        self._process = subprocess.Popen(
            [dovecot, "-F", "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                log = self.root / "dovecot.log"
                raise RuntimeError(f"dovecot exited: {log.read_text() if log.exists() else ''}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.imaps_port), 0.2),
            ):
                return self
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("dovecot did not listen within 15 s")

    def __exit__(self, *_: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def deliver(self, message: EmailMessage, *, seen: bool = False) -> None:
        """Put `message` in the user's INBOX (read already with `seen`)."""
        name = f"{time.time_ns()}.{uuid.uuid4().hex}.choir"
        box = self.maildir / ("cur" if seen else "new")
        target = box / (f"{name}:2,S" if seen else name)
        target.write_bytes(bytes(message))
        os.chown(target, MAIL_UID.pw_uid, MAIL_UID.pw_gid)


@contextlib.contextmanager
def mail_servers(root: Path) -> Iterator[tuple[MailTls, SmtpServer, ImapServer]]:
    tls = MailTls.create(root)
    os.chmod(tls.key, 0o600)
    with SmtpServer(tls) as smtp, ImapServer(root / "dovecot", tls) as imap:
        yield tls, smtp, imap
