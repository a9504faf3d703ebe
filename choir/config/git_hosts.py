"""Where a git identity's credentials may go (§14.4): HTTPS hosts and pinned SSH host keys.

Pure checks of config.json's text. A token is offered only to the hosts named here, and an SSH
key is only ever used with a server whose host key is pinned here (the agent's ssh runs with
`StrictHostKeyChecking yes` against a known_hosts file written from these lines), so a remote
URL a model was talked into cannot phish either.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Final

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

DEFAULT_HTTPS_HOSTS: Final = ("github.com", "gitlab.com")
"""Where a token goes unless the identity names its hosts."""

_LABEL: Final = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST: Final = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?$")
"""A DNS name or dotted IPv4 address, lowercase, with an optional port: what git's credential
protocol sends as `host` (`host:port` when the port is not the scheme's)."""

KEY_TYPES: Final = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
"""Host key types OpenSSH's client accepts (ssh-keyscan prints these)."""
MARKERS: Final = frozenset({"@cert-authority", "@revoked"})


def _https_host(value: str) -> str:
    port = value.rpartition(":")[2] if ":" in value else ""
    if not _HOST.match(value) or (port and not 0 < int(port) < 65536):
        raise PydanticCustomError(
            "not_a_host",
            "not a host name: give the host as git sees it in the URL, lowercase, e.g. "
            "`git.example.com` or `git.example.com:8443`",
        )
    return value


def known_hosts_problem(line: str) -> str | None:
    """Why `line` is not a usable known_hosts entry (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT");
    None when it is."""
    fields = line.split()
    if fields and fields[0] in MARKERS:
        fields = fields[1:]
    if "\n" in line or len(fields) < 3:
        return "expected `HOSTS KEYTYPE BASE64KEY` on one line, as `ssh-keyscan HOST` prints it"
    key_type, blob = fields[1], fields[2]
    if key_type not in KEY_TYPES:
        return f"unknown key type {key_type!r} (known: {', '.join(sorted(KEY_TYPES))})"
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return "the key is not valid base64"
    if _first_string(raw) != key_type.encode():
        return f"the key is not an {key_type} key"
    return None


def _first_string(raw: bytes) -> bytes:
    """The SSH wire format's first field: a 4-byte big-endian length, then that many bytes."""
    size = int.from_bytes(raw[:4], "big")
    return raw[4 : 4 + size] if len(raw) >= 4 + size else b""


def _known_hosts_line(value: str) -> str:
    problem = known_hosts_problem(value)
    if problem is not None:
        raise PydanticCustomError(
            "not_known_hosts", "not a known_hosts line: {problem}", {"problem": problem}
        )
    return value


HttpsHost = Annotated[str, AfterValidator(_https_host)]
KnownHostsLine = Annotated[str, AfterValidator(_known_hosts_line)]
