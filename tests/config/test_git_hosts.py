"""A git identity's HTTPS hosts, SSH key and pinned host keys as `config check` sees them (§14.4).

Each mistake is one line naming the field and how to fix it; a good identity passes and its
fields reach the agent's dynamic config and the session's allowed secrets.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from choir.config import ChoirConfig, validate_config_data
from choir.config.git_hosts import known_hosts_problem
from choir.daemon.agents.config_fetch import dynamic_config
from choir.daemon.sessions.bindings import allowed_secrets
from choir.protocol import ResourceBindings

SPEC_EXAMPLE = Path(__file__).parent / "data" / "spec_example.json"
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKbe1efRlfpdnuHj/ShBx+xGxBX+GlSL3rfNNKRkP3jK"
ECDSA = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBMe+0zDRXCXq+Yhe2vAiUf"
    "BAT4qN6vlkzmadH/jQbqJYAuHoqDrG0imVIyHtUnqOEHkQXJZURf/PLcvDzOvwhJI="
)
SECRETS = {"git-dev-token", "git-dev-ssh"}


@pytest.fixture
def example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SPEC_EXAMPLE.read_text())
    return data


def with_identity(example: dict[str, Any], **fields: Any) -> dict[str, Any]:
    data = copy.deepcopy(example)
    data["git_identities"]["dev-identity"].update(fields)
    return data


def problems(data: dict[str, Any]) -> list[str]:
    return [p for p in validate_config_data(data, None).errors if "git_identities" in p]


def test_an_ssh_identity_with_pinned_hosts_and_its_own_https_hosts_passes(
    example: dict[str, Any],
) -> None:
    data = with_identity(
        example,
        https_hosts=["git.example.com", "gitea.internal:8443"],
        ssh_key_secret="git-dev-ssh",
        ssh_known_hosts=[f"github.com {ED25519}", f"[10.0.0.5]:2222,gitea.internal {ECDSA} c"],
    )
    report = validate_config_data(data, None)
    assert report.errors == []
    assert report.config is not None
    identity = report.config.git_identities["dev-identity"]
    assert identity.https_hosts == ["git.example.com", "gitea.internal:8443"]


def test_https_hosts_default_to_github_and_gitlab(example: dict[str, Any]) -> None:
    config = ChoirConfig.model_validate(example)
    assert config.git_identities["dev-identity"].https_hosts == ["github.com", "gitlab.com"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"https_hosts": ["https://github.com"]},
            "git_identities.dev-identity.https_hosts[0]: not a host name: give the host as git "
            "sees it in the URL, lowercase, e.g. `git.example.com` or `git.example.com:8443`",
        ),
        (
            {"https_hosts": ["git.example.com:99999"]},
            "git_identities.dev-identity.https_hosts[0]: not a host name",
        ),
        (
            {"ssh_key_secret": "git-dev-ssh"},
            "git_identities.dev-identity.ssh_known_hosts: empty, but ssh_key_secret is set: pin "
            "each SSH server's host key (the lines `ssh-keyscan -p PORT HOST` prints)",
        ),
        (
            {"ssh_key_secret": "git-dev-ssh", "ssh_known_hosts": ["github.com"]},
            "git_identities.dev-identity.ssh_known_hosts[0]: not a known_hosts line: expected "
            "`HOSTS KEYTYPE BASE64KEY` on one line, as `ssh-keyscan HOST` prints it",
        ),
        (
            {"ssh_key_secret": "git-dev-ssh", "ssh_known_hosts": ["github.com ssh-dss AAAA"]},
            "git_identities.dev-identity.ssh_known_hosts[0]: not a known_hosts line: unknown key "
            "type 'ssh-dss'",
        ),
        (
            {"ssh_key_secret": "git-dev-ssh", "ssh_known_hosts": ["github.com ssh-ed25519 %%"]},
            "git_identities.dev-identity.ssh_known_hosts[0]: not a known_hosts line: the key is "
            "not valid base64",
        ),
        (
            {
                "ssh_key_secret": "git-dev-ssh",
                "ssh_known_hosts": [f"github.com ssh-rsa {ED25519.split()[1]}"],
            },
            "git_identities.dev-identity.ssh_known_hosts[0]: not a known_hosts line: the key is "
            "not an ssh-rsa key",
        ),
        (
            {"ssh_key_secret": "Not A Name", "ssh_known_hosts": [f"github.com {ED25519}"]},
            "git_identities.dev-identity.ssh_key_secret:",
        ),
    ],
)
def test_each_mistake_is_one_line_naming_the_field(
    example: dict[str, Any], fields: dict[str, Any], expected: str
) -> None:
    found = problems(with_identity(example, **fields))
    assert len(found) == 1, found
    assert found[0].startswith(expected), found[0]
    assert "\n" not in found[0]


def test_a_missing_ssh_key_secret_is_warned_about(example: dict[str, Any]) -> None:
    data = with_identity(
        example, ssh_key_secret="git-dev-ssh", ssh_known_hosts=[f"github.com {ED25519}"]
    )
    warnings = validate_config_data(data, {"git-dev-token"}).warnings
    assert (
        "git_identities.dev-identity.ssh_key_secret: secret 'git-dev-ssh' is not set "
        "(choirctl secret set git-dev-ssh)"
    ) in warnings


def test_the_session_may_fetch_the_ssh_key_and_sees_the_pinned_hosts(
    example: dict[str, Any],
) -> None:
    data = with_identity(
        example, ssh_key_secret="git-dev-ssh", ssh_known_hosts=[f"github.com {ED25519}"]
    )
    config = ChoirConfig.model_validate(data)
    bindings = ResourceBindings(
        workspace="main-ws", llm="sonnet", git_identity="dev-identity", dm="admin-dm"
    )
    assert {"git-dev-token", "git-dev-ssh"} <= set(allowed_secrets(config, bindings))
    bound = dynamic_config(config, bindings)["bound"]["git_identity"]
    assert bound["ssh_known_hosts"] == [f"github.com {ED25519}"]
    assert bound["https_hosts"] == ["github.com", "gitlab.com"]


@pytest.mark.parametrize(
    "line",
    [ED25519, f"github.com {ED25519}\nevil.com {ED25519}", f"@nonsense github.com {ED25519}"],
)
def test_malformed_known_hosts_lines(line: str) -> None:
    assert known_hosts_problem(line) is not None


def test_marked_and_hashed_known_hosts_lines_are_accepted() -> None:
    assert known_hosts_problem(f"@cert-authority *.example.com {ED25519}") is None
    assert known_hosts_problem(f"|1|aGFzaA==|c2FsdA== {ED25519}") is None
