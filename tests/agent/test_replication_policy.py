"""Replication's pure rules (heartbeat contents, refusal verdicts, backoff) and the swapped
config and secrets snapshots."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.backoff import Backoff
from choir.agent.replication.live_config import DynamicConfig, DynamicState, Secrets
from choir.agent.replication.policy import heartbeat_of, judge
from choir.errors import NotFoundError
from choir.protocol import GENESIS_HASH, ErrorCode, HeartbeatRequest, Snapshot, UserMsg
from choir.transport import RpcError

TS = "2025-06-01T12:00:00.000000Z"


def _log(count: int) -> CommitLog:
    log = CommitLog()
    for i in range(count):
        log.commit("edge", UserMsg(text=f"event {i}"))
    return log


def test_a_heartbeat_carries_the_revisions_after_its_base() -> None:
    log = _log(6)
    entries = log.since(2)[:3]

    request = heartbeat_of(
        entries, base_rev=2, hash_prev=entries[0].hash_prev, config_version=4, timestamp=TS
    )

    assert (request.base_rev, request.new_rev, request.config_version) == (2, 5, 4)
    assert [p.rev for p in request.patches] == [3, 4, 5]
    assert request.hash_prev == log.entry(2).hash
    assert request.hash_new == log.entry(5).hash
    assert request.wire()["patches"] == [e.wire() for e in entries]


def test_the_wire_form_is_the_heartbeat_request_choird_validates() -> None:
    """The agent sends its log's JSON unvalidated: it must be exactly what a validated
    `HeartbeatRequest` dumps to, snapshot included."""
    log = _log(4)
    snapshot = Snapshot(rev=4, hash=log.head_hash, latest_user=None)
    for request in (
        heartbeat_of(
            log.since(1),
            base_rev=1,
            hash_prev=log.entry(2).hash_prev,
            config_version=3,
            timestamp=TS,
            snapshot=snapshot,
        ),
        heartbeat_of([], base_rev=4, hash_prev=log.head_hash, config_version=3, timestamp=TS),
    ):
        wire = request.wire()
        assert HeartbeatRequest.model_validate(wire).model_dump(mode="json") == wire


def test_an_empty_heartbeat_is_a_sign_of_life_at_the_base() -> None:
    log = _log(3)
    request = heartbeat_of([], base_rev=3, hash_prev=log.head_hash, config_version=1, timestamp=TS)
    assert (request.new_rev, request.patches, request.hash_new) == (3, [], log.head_hash)


def test_a_snapshot_rides_at_the_new_revision() -> None:
    log = _log(2)
    snapshot = Snapshot(rev=2, hash=log.head_hash)
    request = heartbeat_of(
        log.since(0),
        base_rev=0,
        hash_prev=GENESIS_HASH,
        config_version=1,
        timestamp=TS,
        snapshot=snapshot,
    )
    assert request.snapshot == snapshot


def _behind(expected: int, got: int = 7) -> dict[str, Any]:
    return {"kind": "base_rev_conflict", "expected_base_rev": expected, "got_base_rev": got}


@pytest.mark.parametrize(
    ("code", "details", "batch", "action", "rev"),
    [
        (ErrorCode.UNAVAILABLE, None, 10, "retry", 0),
        (ErrorCode.RATE_LIMITED, None, 10, "retry", 0),
        (ErrorCode.INTERNAL, None, 10, "retry", 0),
        (ErrorCode.PAYLOAD_TOO_LARGE, None, 10, "shrink", 0),
        (ErrorCode.PAYLOAD_TOO_LARGE, None, 1, "fatal", 0),
        (ErrorCode.CONFLICT, _behind(4), 10, "resync", 4),
        (ErrorCode.CONFLICT, _behind(2), 10, "resync", 2),
        (ErrorCode.CONFLICT, _behind(12), 10, "fatal", 0),
        (ErrorCode.CONFLICT, _behind(1), 10, "fatal", 0),
        (ErrorCode.CONFLICT, {"kind": "chain_forked", "rev": 3}, 10, "fatal", 0),
        (ErrorCode.CONFLICT, None, 10, "fatal", 0),
        (ErrorCode.CONFLICT, {"kind": "from_a_newer_choird", "rev": 3}, 10, "fatal", 0),
        (ErrorCode.CONFLICT, {"kind": "base_rev_conflict"}, 10, "fatal", 0),
        (ErrorCode.UNAUTHORIZED, None, 10, "fatal", 0),
        (ErrorCode.INVALID_REQUEST, _behind(4), 10, "fatal", 0),
    ],
)
def test_each_refusal_has_one_verdict(
    code: ErrorCode, details: dict[str, Any] | None, batch: int, action: str, rev: int
) -> None:
    error = RpcError(code, f"{code.value}: one line for people", details)
    verdict = judge(error, head_rev=10, floor_rev=2, batch=batch)
    assert (verdict.action, verdict.rev) == (action, rev)
    assert verdict.reason


def test_the_verdict_reads_the_details_never_the_message() -> None:
    """A base_rev refusal is read from its typed details; its message is only for people."""
    message = "expected base_rev 4, got 7: resend the revisions after 4; nothing was stored"

    with_details = judge(
        RpcError(ErrorCode.CONFLICT, "choird's wording may change", _behind(4)),
        head_rev=10,
        floor_rev=2,
        batch=10,
    )
    message_only = judge(RpcError(ErrorCode.CONFLICT, message), head_rev=10, floor_rev=2, batch=10)

    assert (with_details.action, with_details.rev) == ("resync", 4)
    assert (message_only.action, message_only.reason) == ("fatal", message)


def test_an_ended_session_says_what_to_do() -> None:
    verdict = judge(RpcError(ErrorCode.UNAUTHORIZED, "x"), head_rev=1, floor_rev=0, batch=1)
    assert "restart the agent" in verdict.reason


@given(attempt=st.integers(0, 10_000), rand=st.floats(0, 1, exclude_max=True))
def test_backoff_is_jittered_within_half_to_all_of_a_capped_ceiling(
    attempt: int, rand: float
) -> None:
    backoff = Backoff(base_s=0.05, cap_s=2.0)
    ceiling = min(2.0, 0.05 * 2.0 ** min(attempt, 32))
    assert ceiling / 2 <= backoff.delay(attempt, rand) <= ceiling


def test_backoff_grows_then_stays_at_its_cap() -> None:
    backoff = Backoff(base_s=0.1, cap_s=1.0)
    assert [backoff.delay(n, 0.999999) for n in range(6)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.0, 1.0], rel=1e-5
    )


# -- snapshots ---------------------------------------------------------------------------------

BLOB = {
    "event_window_size": 50,
    "models": {"sonnet": {"secret": "openrouter-key"}, "demo": {"secret": None}},
    "tts": {"eleven": {"secret": "elevenlabs-key"}},
    "voice_profiles": {"calm": {"tts": "eleven"}},
    "search": {"brave": {"secret": "brave-key"}},
    "bound": {"notion": {"secret": "notion-key"}, "git_identity": {"name": "x", "secret": None}},
    "bindings": {"workspace": "w", "llm": "sonnet", "voice_profile": "calm", "dm": "ops"},
    "list": [{"a": 1}],
}


def test_a_config_snapshot_is_deep_frozen() -> None:
    blob = copy.deepcopy(BLOB)
    config = DynamicConfig.of(3, blob)
    blob["event_window_size"] = 1
    blob["models"]["sonnet"]["secret"] = "changed"  # type: ignore[index]

    assert config.data["event_window_size"] == 50
    assert config.data["models"]["sonnet"]["secret"] == "openrouter-key"
    with pytest.raises(TypeError):
        config.data["models"]["sonnet"]["secret"] = "other"
    assert config.data["list"] == ({"a": 1},)


def test_secret_names_are_those_of_the_bound_resources() -> None:
    config = DynamicConfig.of(3, BLOB)
    bindings = config.bindings
    assert bindings is not None
    assert bindings.llm == "sonnet"
    assert config.secret_names() == {"openrouter-key", "elevenlabs-key", "brave-key", "notion-key"}
    assert DynamicConfig(0).secret_names() == frozenset()


def test_the_git_identitys_ssh_key_is_a_secret_the_session_may_fetch() -> None:
    blob = copy.deepcopy(BLOB)
    blob["bound"]["git_identity"].update(secret="git-token", ssh_key_secret="git-ssh")  # type: ignore[index]
    assert {"git-token", "git-ssh"} <= DynamicConfig.of(3, blob).secret_names()


def test_secrets_never_show_their_values_and_are_replaced_whole() -> None:
    old = Secrets.of({"a": SecretStr("one"), "b": SecretStr("two")})
    new = old.replaced({"a": SecretStr("uno")}, keep={"a"})

    assert "one" not in repr(old)
    assert "two" not in str(old)
    assert (old.reveal("a"), new.reveal("a")) == ("one", "uno")
    assert new.names() == {"a"}
    with pytest.raises(NotFoundError, match="secret b is not available"):
        new.reveal("b")


def test_a_swap_replaces_the_reference_and_tells_listeners() -> None:
    state = DynamicState()
    seen: list[int] = []
    unsubscribe = state.subscribe(lambda config: seen.append(config.version))
    held = state.current()

    state.swap_config(DynamicConfig.of(2, BLOB))
    unsubscribe()
    state.swap_config(DynamicConfig.of(1, {}))  # choird is the authority, even going back

    assert held.version == 0
    assert state.current().version == 1
    assert seen == [2]
