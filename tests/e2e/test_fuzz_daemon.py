"""Junk at choird's real listeners: the operator socket, an agent's socket and HTTPS.

Unlike `tests/transport/test_fuzz.py` (a trivial handler), the junk here reaches choird's own
handlers: frames name real verbs (agent and operator), and often carry a live session id and
its real lease token, so malformed payloads get past authentication into payload parsing and
the verbs themselves. After every example choird must still answer `status` on the operator
socket and a valid agent call on both transports. agent-2's session is the probe; the junk only
ever speaks for agent-1 (whose session it may well end, e.g. with a well-formed TERMINATE_SELF).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from choir.agent.replication.control_plane import ControlPlane
from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.operator.api import VERBS as OPERATOR_VERBS
from choir.home import ChoirHome
from choir.protocol import ReportStatusRequest, Verb
from choir.store.postgres.target import ConnectParams
from choir.transport.framing import encode_frame
from choir.transport.tls import client_context
from tests.harness.daemons import agent_control_plane, certificate
from tests.harness.homes import external_postgres, make_home, short_root

pytestmark = pytest.mark.slow

AGENT_VERBS = [verb.value for verb in Verb]
FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Listeners:
    """choird's listeners, agent-1's credentials for the junk, agent-2's clients as probes."""

    daemon: ChoirDaemon
    operator: ChoirClient
    agent_socket: Path
    http_port: int
    session_id: str
    lease_token: str
    probes: tuple[ControlPlane, ...]

    async def still_answer(self) -> None:
        async with asyncio.timeout(5):
            status = await self.operator.status()
            assert status.postgres.state == "ok"
            for probe in self.probes:
                report = ReportStatusRequest(lane="edge", state="EDGE_IDLE")
                assert (await probe.report_status(report)).ack is True


@pytest.fixture
def home(pg_params: ConnectParams) -> Iterator[ChoirHome]:
    """tests/e2e's home, its crash detection far off: the probes send no heartbeat, and 250
    examples on a loaded machine outlast the default 10 s after which choird would end agent-2's
    session as crashed (the junk's doing is what is tested, not the reaper's)."""
    with short_root() as root:
        yield make_home(
            root, postgres=external_postgres(pg_params), crash_detection_threshold_ms=3_600_000
        )


@pytest.fixture
async def listeners(daemon: ChoirDaemon, operator: ChoirClient) -> AsyncIterator[Listeners]:
    assert daemon.services is not None
    assert daemon.http is not None
    target = await daemon.services.sessions.start("agent-1", {})
    probe = await daemon.services.sessions.start("agent-2", {})
    probes = [
        await agent_control_plane(
            daemon, transport, probe.session_id, probe.lease_token, agent_id="agent-2"
        )
        for transport in ("uds", "https")
    ]
    try:
        yield Listeners(
            daemon,
            operator,
            await daemon.open_agent_socket("agent-1"),
            daemon.http.port,
            target.session_id,
            target.lease_token,
            tuple(probes),
        )
    finally:
        for control_plane in probes:
            await control_plane.close()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
WELL_FORMED: dict[str, dict[str, Any]] = {
    "REPORT_STATUS": {"lane": "edge", "state": "EDGE_IDLE"},
    "TERMINATE_SELF": {"reason": "fuzz"},
    "REQUEST_APPROVAL": {"request_type": "tool", "payload": {}},
    "FETCH_DYNAMIC_CONFIG": {"current_config_version": 0},
    "EXECUTE_HOST_TOOL": {"tool_name": "choir.web.browse", "call_id": "c-1"},
    "GET_SECRETS": {"resources": ["git-token"]},
    "agent.status": {"agent_id": "agent-1"},
}
"""A payload each verb accepts as it is (any other verb: `{}`)."""
payloads = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "base_rev": json_values | st.integers(0, 5),
            "new_rev": json_values | st.integers(0, 5),
            "patches": st.lists(json_values, max_size=3),
            "hash_prev": st.sampled_from(["0" * 64, "x"]) | json_values,
            "reason": st.text(max_size=10),
            "resources": st.lists(st.sampled_from(["git-token", "pg", ""]), max_size=3),
            "request_type": st.sampled_from(["tool", "skill", "nope"]),
            "tool_name": st.text(max_size=12),
            "agent_id": st.sampled_from(["agent-1", "agent-2", "", "../x"]),
            "lane": st.sampled_from(["edge", "core:x", "bad lane"]),
        },
    ),
)


def frames(verbs: list[str], session_id: str, lease_token: str) -> st.SearchStrategy[bytes]:
    """Encoded frames naming `verbs`, often with the live session's real credentials."""
    frame = st.fixed_dictionaries(
        {"t": st.sampled_from(["req", "req", "req", "sub", "cancel", "res", "x"])},
        optional={
            "request_id": st.text(max_size=8) | json_values,
            "verb": st.sampled_from(verbs) | st.text(max_size=12) | json_values,
            "session_id": st.sampled_from([session_id, "s-0"]) | json_values,
            "lease_token": st.sampled_from([lease_token, lease_token[:-1]]) | json_values,
            "payload": payloads,
            "stream": st.booleans(),
            "after_seq": st.integers(-5, 5) | json_values,
        },
    )
    return st.lists(frame, min_size=1, max_size=4).map(
        lambda items: b"".join(encode_frame(item) for item in items)
    )


@st.composite
def envelopes(draw: st.DrawFn, verbs: list[str], session_id: str, lease_token: str) -> bytes:
    """A well-formed request frame with the live credentials, its payload the verb's own,
    the verb's own with a random key added, or random."""
    verb = draw(st.sampled_from(verbs))
    accepted = WELL_FORMED.get(verb, {})
    payload = draw(
        st.sampled_from([accepted, accepted, {}])
        | st.builds(lambda key, value: {**accepted, key: value}, st.text(max_size=8), json_values)
        | payloads
    )
    return encode_frame(
        {
            "t": "req",
            "request_id": draw(st.text("0123456789abcdef", min_size=1, max_size=8)),
            "verb": verb,
            "session_id": session_id,
            "lease_token": lease_token,
            "payload": payload,
        }
    )


@st.composite
def socket_junk(draw: st.DrawFn, verbs: list[str], session_id: str, token: str) -> bytes:
    """Noise, frames, frames cut short, or a length prefix far over the frame cap."""
    kinds = ["envelopes", "noise", "envelopes", "frames", "envelopes", "truncated", "huge_prefix"]
    kind = draw(st.sampled_from(kinds))
    if kind == "noise":
        return draw(st.binary(max_size=200))
    if kind == "envelopes":
        return draw(envelopes(verbs, session_id, token))
    encoded = draw(frames(verbs, session_id, token))
    if kind == "frames":
        return encoded
    if kind == "truncated":
        return encoded[: draw(st.integers(0, len(encoded) - 1))]
    prefix = struct.pack(">I", draw(st.integers(1 << 21, (1 << 32) - 1)))
    return prefix + draw(st.binary(max_size=50))


@st.composite
def http_junk(draw: st.DrawFn, session_id: str, token: str) -> bytes:
    """A POST to /rpc/<verb> with random headers and body, or raw noise."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=300))
    verb = draw(st.sampled_from(AGENT_VERBS) | st.text("abcXYZ_-.%/0", max_size=30))
    accepted = WELL_FORMED.get(verb, {})
    body = draw(
        st.sampled_from([accepted, {}]).map(orjson.dumps)
        | payloads.map(orjson.dumps)
        | st.binary(max_size=200)
    )
    auth = draw(st.sampled_from([f"Bearer {token}", f"Bearer {token}", "Bearer x", "Basic x", ""]))
    session = draw(st.sampled_from([session_id, session_id, "", "s-0", "x" * 300]))
    length = draw(st.sampled_from([len(body), len(body), len(body) + 10, 0, 10**9]))
    head = (
        f"POST /rpc/{verb} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\n"
        f"X-Choir-Session-Id: {session}\r\nContent-Length: {length}\r\n\r\n"
    )
    return head.encode("utf-8", "surrogateescape") + body


async def throw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, junk: bytes) -> None:
    """Send `junk`, read for a moment, hang up; the peer closing on us is fine."""
    try:
        writer.write(junk)
        await writer.drain()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.01):
                await reader.read(65536)
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


@FUZZ
@given(data=st.data())
async def test_socket_junk_never_stops_choird(listeners: Listeners, data: st.DataObject) -> None:
    operator_side = data.draw(st.booleans(), label="operator socket")
    path = listeners.daemon.home.operator_socket if operator_side else listeners.agent_socket
    verbs = [*OPERATOR_VERBS, *AGENT_VERBS] if operator_side else AGENT_VERBS
    junk = data.draw(socket_junk(verbs, listeners.session_id, listeners.lease_token))
    with contextlib.suppress(FileNotFoundError, ConnectionRefusedError):
        # agent-1's socket closes for good if the junk ended its session.
        await throw(*await asyncio.open_unix_connection(str(path)), junk)
    await listeners.still_answer()


@FUZZ
@given(data=st.data())
async def test_https_junk_never_stops_choird(listeners: Listeners, data: st.DataObject) -> None:
    junk = data.draw(http_junk(listeners.session_id, listeners.lease_token))
    context = client_context(certificate(listeners.daemon))
    connection = await asyncio.open_connection(
        "127.0.0.1", listeners.http_port, ssl=context, server_hostname="127.0.0.1"
    )
    await throw(*connection, junk)
    await listeners.still_answer()
