"""Calls behave the same on every transport: answers, errors, envelope plumbing, concurrency."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from choir.errors import ExitCode
from choir.protocol.wire.envelope import ErrorCode
from choir.transport import CallTimeout, RpcError
from choir.transport.frames import error_body, error_from_body
from tests.harness.waits import poll_until
from tests.transport.conftest import Served


async def test_round_trip_carries_the_envelope_unchanged(served: Served) -> None:
    async with await served.client(session_id="s-1", lease_token="tok/+=en") as client:
        answer = await client.call("echo", {"x": [1, "two", {"three": 3.0}], "u": "é✓"})
    assert answer["payload"] == {"x": [1, "two", {"three": 3.0}], "u": "é✓"}
    assert (answer["verb"], answer["session_id"], answer["lease_token"]) == (
        "echo",
        "s-1",
        "tok/+=en",
    )
    assert answer["transport"] == ("uds" if served.transport == "uds" else "http")
    assert len(answer["request_id"]) == 32


async def test_per_call_credentials_override_the_clients(served: Served) -> None:
    async with await served.client(session_id="s-1", lease_token="a") as client:
        answer = await client.call("echo", session_id="s-2", lease_token="b")
    assert (answer["session_id"], answer["lease_token"]) == ("s-2", "b")


async def test_empty_payload_and_no_credentials(served: Served) -> None:
    async with await served.client() as client:
        assert await client.call("empty") == {}
        answer = await client.call("echo")
    assert (answer["payload"], answer["session_id"], answer["lease_token"]) == ({}, "", "")


async def test_lease_check_in_the_handler_rejects_a_wrong_token(served: Served) -> None:
    async with await served.client(session_id="s-9") as client:
        assert await client.call("secure", lease_token="lease-s-9") == {"ok": True}
        with pytest.raises(RpcError) as caught:
            await client.call("secure", lease_token="stolen")
    assert caught.value.code is ErrorCode.UNAUTHORIZED
    assert caught.value.message == "unknown session or wrong lease token"


@pytest.mark.parametrize("code", list(ErrorCode))
async def test_handler_errors_reach_the_client_with_code_and_message(
    served: Served, code: ErrorCode
) -> None:
    async with await served.client() as client:
        with pytest.raises(RpcError) as caught:
            await client.call("fail", {"code": code.value, "message": f"no: {code.value}"})
        assert await client.call("empty") == {}
    assert (caught.value.code, caught.value.message) == (code, f"no: {code.value}")


async def test_error_details_reach_the_client_as_sent_and_are_left_out_when_none(
    served: Served,
) -> None:
    details = {"kind": "base_rev_conflict", "expected_base_rev": 4, "got_base_rev": 7}
    async with await served.client() as client:
        with pytest.raises(RpcError) as detailed:
            await client.call("fail", {"code": "conflict", "message": "m", "details": details})
        with pytest.raises(RpcError) as plain:
            await client.call("fail", {"code": "conflict", "message": "m"})
    assert (detailed.value.code, detailed.value.details) == (ErrorCode.CONFLICT, details)
    assert plain.value.details is None


def test_an_error_body_has_details_only_when_the_error_has_them() -> None:
    plain = RpcError(ErrorCode.CONFLICT, "m")
    detailed = RpcError(ErrorCode.CONFLICT, "m", {"kind": "chain_forked", "rev": 3})

    assert error_body(plain) == {"code": "conflict", "message": "m"}
    assert error_from_body(error_body(detailed)).details == {"kind": "chain_forked", "rev": 3}
    assert error_from_body({"code": "conflict", "message": "m", "details": [1]}).details is None


async def test_a_request_says_how_many_bytes_carried_it(served: Served) -> None:
    payload = {"text": "é" * 1000, "n": list(range(100))}
    async with await served.client(session_id="s-1", lease_token="t") as client:
        answer = await client.call("echo", payload)
    # The payload's own JSON arrived within them (on the socket, with the envelope around it).
    assert answer["size"] >= len(orjson.dumps(payload))
    assert answer["size"] < len(orjson.dumps(payload)) + 300


async def test_unknown_verb_is_the_handlers_not_found(served: Served) -> None:
    async with await served.client() as client:
        with pytest.raises(RpcError) as caught:
            await client.call("NO_SUCH_VERB")
    assert caught.value.code is ErrorCode.NOT_FOUND
    assert caught.value.exit_code is ExitCode.NOT_FOUND
    assert "NO_SUCH_VERB" in caught.value.message


@pytest.mark.parametrize("verb", ["boom", "not_a_dict"])
async def test_a_handler_bug_is_internal_and_the_server_lives_on(
    served: Served, verb: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with await served.client() as client:
        with pytest.raises(RpcError) as caught:
            await client.call(verb)
        assert await client.call("empty") == {}
    assert caught.value.code is ErrorCode.INTERNAL
    assert "handler bug" not in caught.value.message
    assert any(verb in str(getattr(r, "fields", {})) for r in caplog.records)


async def test_concurrent_calls_on_one_client_get_their_own_answers(served: Served) -> None:
    delays = [0.05, 0.01, 0.03, 0.0, 0.02] * 4
    async with await served.client() as client:
        answers = await asyncio.gather(
            *(client.call("slow", {"delay": d, "n": n}) for n, d in enumerate(delays))
        )
    assert [a["n"] for a in answers] == list(range(len(delays)))
    assert served.handler.finished_calls[:2] != ["0", "1"]


async def test_a_stream_verb_called_as_a_call_is_refused(served: Served) -> None:
    async with await served.client() as client:
        with pytest.raises(RpcError) as caught:
            await client.call("count", {"n": 3})
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert "stream" in caught.value.message


async def test_payload_over_the_cap_is_refused_before_sending(served: Served) -> None:
    async with await served.client(max_frame=1000) as client:
        with pytest.raises(RpcError) as caught:
            await client.call("echo", {"blob": "x" * 2000})
        assert await client.call("echo", {"blob": "x" * 100}) != {}
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert served.handler.seen[-1].payload == {"blob": "x" * 100}
    assert len(served.handler.seen) == 1


async def test_payload_over_the_servers_cap_is_refused_and_the_next_call_answered(
    served: Served,
) -> None:
    big = {"blob": "x" * (2 << 20)}
    async with await served.client(max_frame=4 << 20) as client:
        with pytest.raises(RpcError) as caught:
            await client.call("echo", big)
        assert await client.call("empty") == {}
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert "limit" in caught.value.message
    assert [r.verb for r in served.handler.seen] == ["empty"]


async def test_a_call_outliving_the_client_timeout_raises_call_timeout(served: Served) -> None:
    async with await served.client(call_timeout=0.05) as client:
        with pytest.raises(CallTimeout):
            await client.call("slow", {"delay": 0.5, "n": 1})
        assert await client.call("empty") == {}


async def test_a_call_whose_client_gives_up_still_runs_to_completion(served: Served) -> None:
    async with await served.client() as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await client.call("slow", {"delay": 0.2, "n": 5})
    await poll_until(lambda: served.handler.finished_calls == ["5"])
