"""Fixtures of the fault scenarios: a cluster factory and a checker bound to it.

    async def test_x(cluster_of: ClusterOf) -> None:
        cluster = await cluster_of(SCRIPT, agents=5, heartbeat_interval_ms=500)
        checker = checker_for(cluster)     # tests.faults.invariants

Each test gets a fresh short root under /tmp and a fresh database; everything the cluster
started is stopped (agents, tool processes, choird, the model server) when the test ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from choir.scripted import ReplyStep, Script, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.cluster import Cluster, running_cluster
from tests.harness.failure_logs import keep_logs_of
from tests.harness.homes import short_root

ClusterOf = Callable[..., Awaitable[Cluster]]


@pytest.fixture
def fault_root(request: pytest.FixtureRequest) -> Iterator[Path]:
    with short_root("cf-") as root:
        keep_logs_of(request.node, root)  # shown with a failure
        yield root


@pytest.fixture
async def cluster_of(fault_root: Path, pg_params: ConnectParams) -> AsyncIterator[ClusterOf]:
    """Start the test's cluster: `cluster_of(script, agents=N, **config_keys)` (once)."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            script: Script | Sequence[ReplyStep | ToolCallsStep], *, agents: int = 1, **config: Any
        ) -> Cluster:
            return await stack.enter_async_context(
                running_cluster(fault_root, pg_params, script, agents=agents, **config)
            )

        yield start
