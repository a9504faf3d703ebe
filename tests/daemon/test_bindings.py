"""Pure rules: bindings from defaults and overrides, what they lease, which secrets they open."""

from __future__ import annotations

import pytest

from choir.config import load_home
from choir.daemon.agents.refusals import RpcFault, rpc_error_of
from choir.daemon.sessions.bindings import allowed_secrets, exclusive_resources, resolve_bindings
from choir.errors import (
    ChoirError,
    ConfigError,
    ConflictError,
    NotFoundError,
    UnavailableError,
    UsageError,
)
from choir.protocol import ErrorCode
from choir.store.leases import Resource

from .conftest import read_config, write_config


@pytest.fixture
def config(home):
    return load_home(home).config


def test_none_keeps_the_default_and_hyphens_name_roles(config):
    bindings = resolve_bindings(
        config, "agent-2", {"llm": None, "voice-profile": None, "git-identity": "agent-1"}
    )

    assert (bindings.llm, bindings.voice_profile, bindings.git_identity) == (
        "sonnet",
        "calm",
        "agent-1",
    )


def test_a_required_default_left_empty_must_be_given(home):
    data = read_config(home)
    data["agents"]["agent-1"]["defaults"]["git_identity"] = ""
    write_config(home, data)
    config = load_home(home).config

    with pytest.raises(UsageError) as caught:
        resolve_bindings(config, "agent-1", {})

    assert str(caught.value) == (
        "cannot start agent-1: no git identity chosen: pass --git-identity or set "
        "agents.agent-1.defaults.git_identity"
    )
    assert (
        resolve_bindings(config, "agent-1", {"git_identity": "agent-1"}).git_identity == "agent-1"
    )


def test_every_problem_is_reported_at_once(config):
    with pytest.raises(UsageError) as caught:
        resolve_bindings(config, "agent-1", {"workspace": "x", "notion": "y"})

    assert str(caught.value) == (
        "cannot start agent-1: --workspace: no workspace named 'x' (known: default, other); "
        "--notion: no Notion integration named 'y' (known: personal)"
    )


def test_exclusive_resources_are_the_agent_and_its_exclusive_bindings(config):
    bindings = resolve_bindings(config, "agent-2", {})

    assert exclusive_resources(config, "agent-2", bindings) == [
        Resource("agent", "agent-2"),
        Resource("workspace", "other"),
        Resource("git_identity", "agent-2"),
        Resource("notion", "personal"),
        Resource("email", "work"),
        Resource("dm", "ops"),
    ]


def test_secrets_follow_the_bindings(config):
    plain = resolve_bindings(config, "agent-1", {})
    rich = resolve_bindings(config, "agent-1", {"llm": "sonnet", "email": "news"})

    assert allowed_secrets(config, plain) == ["brave-key"]
    assert allowed_secrets(config, rich) == ["brave-key", "news-mail", "openrouter-key"]


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (RpcFault(ErrorCode.RATE_LIMITED, "slow down"), ErrorCode.RATE_LIMITED, "slow down"),
        (NotFoundError("no x"), ErrorCode.NOT_FOUND, "no x"),
        (ConflictError("held"), ErrorCode.CONFLICT, "held"),
        (UnavailableError("db down"), ErrorCode.UNAVAILABLE, "db down"),
        (UsageError("bad"), ErrorCode.INVALID_REQUEST, "bad"),
        (
            ConfigError(["a: 1", "b: 2"], header="2 problems:"),
            ErrorCode.INVALID_REQUEST,
            "2 problems:; a: 1; b: 2",
        ),
        (ChoirError("other"), ErrorCode.INTERNAL, "other"),
        (KeyError("secret-value"), ErrorCode.INTERNAL, "internal error in choird (see choird.log)"),
    ],
)
def test_errors_map_to_wire_codes_without_leaking_internals(error, code, message):
    wire = rpc_error_of(error)

    assert (wire.code, wire.message) == (code, message)
