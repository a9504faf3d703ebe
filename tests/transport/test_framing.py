"""The pure frame layer: splitting a byte stream, the cap, and frame shape checks."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.protocol.wire.envelope import ErrorCode
from choir.transport.frames import (
    FrameError,
    decode_frame,
    error_from_body,
    parse_request,
    parse_subscribe,
    request_frame,
)
from choir.transport.framing import FrameReader, FrameTooLarge, encode_frame
from choir.transport.handler import Peer

PEER = Peer("uds", "/tmp/x.sock")


def bodies(reader: FrameReader) -> list[bytes]:
    found = []
    while (body := reader.next_body()) is not None:
        found.append(body)
    return found


json_objects = st.dictionaries(
    st.text(max_size=5),
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.none()),
    max_size=4,
)


@given(frames=st.lists(json_objects, max_size=6), cuts=st.lists(st.integers(0, 400)))
def test_frames_survive_any_chunking(frames: list[dict[str, object]], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(f) for f in frames)
    reader = FrameReader()
    received: list[bytes] = []
    start = 0
    for cut in [*sorted(c for c in cuts if c < len(stream)), len(stream)]:
        reader.feed(stream[start:cut])
        start = cut
        received.extend(bodies(reader))
    assert [orjson.loads(b) for b in received] == frames
    assert not reader.partial


def test_the_cap_is_checked_on_the_header_and_the_body_skipped() -> None:
    reader = FrameReader(max_frame=10)
    big = encode_frame({"x": "y" * 100})
    small = encode_frame({"a": 1})
    reader.feed(big[:20])
    with pytest.raises(FrameTooLarge) as caught:
        reader.next_body()
    assert (caught.value.size, caught.value.limit) == (len(big) - 4, 10)
    assert reader.partial
    assert reader.skipping == len(big) - 20
    reader.feed(big[20:] + small)
    assert bodies(reader) == [orjson.dumps({"a": 1})]
    assert not reader.partial


def test_a_partial_header_is_partial() -> None:
    reader = FrameReader()
    reader.feed(b"\x00\x00")
    assert reader.next_body() is None
    assert reader.partial


@pytest.mark.parametrize("body", [b"", b"nul\x00", b"1", b'"s"', b"[]", b'{"t": null}'])
def test_bodies_that_are_not_frame_objects(body: bytes) -> None:
    with pytest.raises(FrameError):
        decode_frame(body)


def test_a_request_frame_round_trips_into_a_request() -> None:
    frame = request_frame("r", "HEARTBEAT", "s", "lease", {"a": 1}, stream=True)
    request = parse_request(decode_frame(encode_frame(frame)[4:]), PEER)
    assert (request.verb, request.request_id, request.session_id) == ("HEARTBEAT", "r", "s")
    assert (request.lease_token, request.payload, request.stream) == ("lease", {"a": 1}, True)
    assert "lease" not in repr(request)


def test_optional_request_fields_default() -> None:
    request = parse_request({"t": "req", "request_id": "r", "verb": "v"}, PEER)
    assert (request.session_id, request.lease_token, request.payload) == ("", "", {})
    assert request.stream is False


@pytest.mark.parametrize(
    ("frame", "message", "request_id"),
    [
        ({"t": "sub", "session_id": "s"}, "request_id is missing or empty", None),
        ({"t": "sub", "request_id": "r"}, "session_id is missing or empty", "r"),
        ({"t": "sub", "request_id": "r", "session_id": "s", "after_seq": -1}, "after_seq", "r"),
        ({"t": "sub", "request_id": "r", "session_id": "s", "after_seq": True}, "after_seq", "r"),
        ({"t": "sub", "request_id": "r", "session_id": "s", "x": 1}, "unknown", "r"),
        ({"t": "sub", "request_id": "r" * 201, "session_id": "s"}, "longer than 200", None),
    ],
)
def test_bad_subscribe_frames(
    frame: dict[str, object], message: str, request_id: str | None
) -> None:
    with pytest.raises(FrameError, match=message) as caught:
        parse_subscribe(frame)
    assert caught.value.request_id == request_id


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"code": "not_found", "message": "gone"}, ErrorCode.NOT_FOUND, "gone"),
        ({"code": "brand_new_code", "message": "m"}, ErrorCode.INTERNAL, "m"),
        ({"code": ["list"], "message": 3}, ErrorCode.INTERNAL, "internal error"),
        ("nonsense", ErrorCode.INTERNAL, "the server sent an error without details"),
    ],
)
def test_error_bodies_from_a_peer_are_read_tolerantly(
    body: object, code: ErrorCode, message: str
) -> None:
    error = error_from_body(body)
    assert (error.code, error.message) == (code, message)


def test_the_header_is_big_endian_length() -> None:
    data = encode_frame({"t": "x"})
    assert struct.unpack(">I", data[:4]) == (len(data) - 4,)


def test_a_lone_surrogate_is_sent_as_the_replacement_character() -> None:
    """An argument that is not UTF-8 (argv decodes it to a lone surrogate) must not fail the
    call that carries it."""
    reader = FrameReader()
    reader.feed(encode_frame({"t": "req", "text": "raw \udcff"}))
    body = reader.next_body()
    assert body is not None
    assert orjson.loads(body) == {"t": "req", "text": "raw \ufffd"}
