"""Control-plane round trips: an empty call over the Unix socket and over HTTPS.

The server runs in its own process (as choird does), serving a trivial handler on both
transports; the client makes one connection and a few thousand sequential calls after a warm-up,
the way choir-agent and choirctl talk to choird. Add a figure by adding a coroutine to FIGURES.

    python -m bench.rpc [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import parse_args, percentile, report
from choir.transport import Client, HttpServer, Payload, Request, Stream, UdsServer, connect, tls

GOALS = {
    "uds_empty_p50_ms": "goal <= 0.2",
    "uds_empty_p99_ms": "goal <= 0.5",
    "https_empty_p50_ms": "goal <= 1.5",
}
REPO = Path(__file__).resolve().parents[1]


class EmptyHandler:
    """Answers every verb with an empty payload: the cost measured is the transport's alone."""

    async def handle(self, request: Request) -> Payload | Stream:
        return {}

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        return False


@dataclass(frozen=True)
class Bench:
    """Where the benchmark server listens, and how many calls to time."""

    socket_path: Path
    https_url: str
    ca_file: Path
    calls: int
    warmup: int


async def empty_call_latencies(client: Client, bench: Bench, calls: int) -> list[float]:
    """Milliseconds per sequential empty call, after a warm-up."""
    for _ in range(bench.warmup):
        await client.call("empty", session_id="s", lease_token="t")
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        await client.call("empty", session_id="s", lease_token="t")
        samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


async def uds_empty(bench: Bench) -> dict[str, float]:
    async with await connect(bench.socket_path) as client:
        samples = await empty_call_latencies(client, bench, bench.calls)
    return {
        "uds_empty_p50_ms": percentile(samples, 50),
        "uds_empty_p99_ms": percentile(samples, 99),
    }


async def https_empty(bench: Bench) -> dict[str, float]:
    async with await connect(bench.https_url, ca_file=bench.ca_file) as client:
        samples = await empty_call_latencies(client, bench, bench.calls // 2)
    return {
        "https_empty_p50_ms": percentile(samples, 50),
        "https_empty_p99_ms": percentile(samples, 99),
    }


FIGURES: list[Callable[[Bench], Awaitable[dict[str, float]]]] = [uds_empty, https_empty]
"""Each measures against the running benchmark server and returns its figures."""


def serve(root: str) -> None:
    """The server process: both listeners until stdin closes; prints the HTTPS port when ready."""
    asyncio.run(_serve(Path(root)))


async def _serve(root: Path) -> None:
    handler = EmptyHandler()
    context = tls.server_context(root / "cert.pem", root / "key.pem")
    async with (
        UdsServer(root / "bench.sock", handler),
        HttpServer(handler, ssl_context=context) as http,
    ):
        print(f"ready {http.port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


@contextlib.asynccontextmanager
async def bench_server(root: Path, quick: bool) -> AsyncIterator[Bench]:
    tls.create_self_signed(root / "cert.pem", root / "key.pem")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        f"from bench.rpc import serve; serve({str(root)!r})",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode().split()
        if line[:1] != ["ready"]:
            raise RuntimeError("the benchmark server did not start")
        yield Bench(
            socket_path=root / "bench.sock",
            https_url=f"https://127.0.0.1:{line[1]}",
            ca_file=root / "cert.pem",
            calls=1_000 if quick else 10_000,
            warmup=200 if quick else 1_000,
        )
    finally:
        process.stdin.close()
        await process.wait()


async def measure(quick: bool) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="choir-bench-", dir="/tmp") as root:
        async with bench_server(Path(root), quick) as bench:
            for figure in FIGURES:
                figures |= await figure(bench)
    return figures


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = asyncio.run(measure(args.quick))
    report("control-plane RPC (ms per empty call)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
