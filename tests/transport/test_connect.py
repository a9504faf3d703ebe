"""`connect` picks the transport from the target, once; callers never branch on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from choir.errors import UsageError
from choir.transport import HttpClient, TransportError, UdsClient, connect
from tests.transport.conftest import Served


async def test_a_path_and_a_unix_url_pick_the_socket(uds_served: Served) -> None:
    for target in (uds_served.target, Path(uds_served.target), f"unix://{uds_served.target}"):
        async with await connect(target) as client:
            assert isinstance(client, UdsClient)
            assert await client.call("empty") == {}


async def test_http_urls_pick_http(https_served: Served) -> None:
    async with await connect(https_served.target, ca_file=https_served.ca_file) as client:
        assert isinstance(client, HttpClient)
        assert await client.call("empty") == {}


async def test_an_unknown_scheme_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown transport 'grpc'"):
        await connect("grpc://host:1")


async def test_nothing_listening_over_http_is_a_transport_error() -> None:
    async with await connect("http://127.0.0.1:9") as client:
        with pytest.raises(TransportError, match=r"cannot reach http://127\.0\.0\.1:9"):
            await client.call("empty")


def test_a_socket_client_does_not_import_the_http_stack() -> None:
    """choirctl talks to choird over the socket; aiohttp, httpx and cryptography cost it
    hundreds of milliseconds at startup, so they load only for HTTP."""
    code = (
        "import sys\n"
        "from choir.transport import UdsClient, connect, RpcError\n"
        "print(sorted(m for m in ('aiohttp', 'httpx', 'cryptography') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
