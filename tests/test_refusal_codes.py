"""One table translates refusals: choird sends a class's code, clients raise the code's class."""

from __future__ import annotations

import pytest

from choir.client import operator_error
from choir.daemon.agents.refusals import RpcFault, rpc_error_of
from choir.errors import (
    ChoirError,
    ConfigError,
    ConflictError,
    ExitCode,
    NotFoundError,
    UnavailableError,
    UsageError,
    error_class,
    wire_code,
)
from choir.protocol.wire.error_codes import ErrorCode
from choir.transport import RpcError, TransportError


@pytest.mark.parametrize(
    ("sent", "received"),
    [
        (NotFoundError("x"), NotFoundError),
        (ConflictError("x"), ConflictError),
        (UnavailableError("x"), UnavailableError),
        (TransportError("x"), UnavailableError),
        (UsageError("x"), UsageError),
        (ConfigError(["x"]), UsageError),  # a config problem leaves as invalid_request
        (ChoirError("x"), ChoirError),
        (RpcFault(ErrorCode.RATE_LIMITED, "x"), UnavailableError),
        (RpcError(ErrorCode.CONFLICT, "x"), ConflictError),
    ],
)
def test_a_refusal_arrives_as_the_class_it_left_as(sent: ChoirError, received: type[ChoirError]):
    wire = rpc_error_of(sent)

    arrived = operator_error(RpcError(wire.code, wire.message))

    assert type(arrived) is received
    assert wire.code == wire_code(sent)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_exits_like_the_class_it_is_raised_as(code: ErrorCode):
    refused = RpcError(code, "refused")

    assert refused.exit_code == operator_error(refused).exit_code == error_class(code).exit_code


def test_codes_exit_as_documented():
    exits = {code: error_class(code).exit_code for code in ErrorCode}
    assert exits[ErrorCode.NOT_FOUND] == ExitCode.NOT_FOUND
    assert exits[ErrorCode.CONFLICT] == ExitCode.CONFLICT
    assert exits[ErrorCode.INVALID_REQUEST] == exits[ErrorCode.PAYLOAD_TOO_LARGE] == ExitCode.USAGE
    assert exits[ErrorCode.UNAVAILABLE] == exits[ErrorCode.RATE_LIMITED] == ExitCode.UNAVAILABLE
    assert exits[ErrorCode.INTERNAL] == exits[ErrorCode.UNAUTHORIZED] == ExitCode.ERROR
