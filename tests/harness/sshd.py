"""A real OpenSSH server on loopback serving git repositories, for the git-over-SSH tests.

`sshd -D -e` runs as the test's user on 127.0.0.1 with a host key of its own, a config file of
its own and one authorized client key; git's `git-upload-pack` runs through the user's shell as
on any git host. Debian's `openssh-server` provides it (`.ci/run` installs it); without it the
test skips, or fails in CI.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
READY_WITHIN_S = 10.0


def require_sshd() -> None:
    """Skip without sshd and ssh-agent — or fail in CI, which installs them."""
    missing = [tool for tool in (SSHD, "ssh-agent", "ssh-add") if not shutil.which(tool)]
    if not missing:
        return
    problem = f"{', '.join(missing)} not installed (apt-get install openssh-server)"
    if os.environ.get("CI"):
        pytest.fail(problem, pytrace=False)
    pytest.skip(problem)


def keypair(path: Path, comment: str) -> str:
    """A new ed25519 key at `path` (no passphrase); its public line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        timeout=30,
    )
    return path.with_suffix(".pub").read_text().strip()


def key_fingerprint(public: Path) -> str:
    """`SHA256:…` of the public key file, as `ssh-add -l` lists it."""
    listed = subprocess.run(
        ["ssh-keygen", "-lf", str(public)], capture_output=True, text=True, check=True, timeout=30
    )
    return listed.stdout.split()[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Sshd:
    port: int
    host_key: str
    """The server's public host key line (`ssh-ed25519 AAAA… comment`)."""
    user: str

    def known_hosts_line(self, key: str | None = None) -> str:
        """The known_hosts line pinning `key` (default: this server's) for this port."""
        key_type, blob = (key or self.host_key).split()[:2]
        return f"[127.0.0.1]:{self.port} {key_type} {blob}"

    def url(self, path: Path) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{path}"


@contextlib.contextmanager
def git_sshd(root: Path, authorized_key: str) -> Iterator[Sshd]:
    """sshd on a free loopback port letting `authorized_key` in; stopped on exit."""
    require_sshd()
    root.mkdir(parents=True, exist_ok=True)
    host_key = keypair(root / "host_key", "test-sshd")
    authorized = root / "authorized_keys"
    authorized.write_text(authorized_key + "\n")
    port, user = free_port(), getpass.getuser()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {authorized}\nAllowUsers {user}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\nLogLevel ERROR\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation dir
    log = (root / "sshd.log").open("wb")
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=log)
    try:
        _wait_listening(port, process)
        yield Sshd(port, host_key, user)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited with code {process.returncode}")
        with socket.socket() as probe, contextlib.suppress(OSError):
            probe.connect(("127.0.0.1", port))
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on port {port} within {READY_WITHIN_S} s")


def bare_repo(path: Path) -> Path:
    """A bare repository at `path` with one commit holding README."""
    work = path.with_name(path.name + "-work")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(path.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (
        ["init", "-q", "-b", "main", str(work)],
        ["-C", str(work), "commit", "-q", "--allow-empty", "-m", "over ssh"],
        ["clone", "-q", "--bare", str(work), str(path)],
    ):
        subprocess.run(["git", *args], check=True, env=env, timeout=30)
    return path
