"""Metrics count what an adopted agent replicates while choird is still starting.

choird (`metrics.listen` on a Unix socket) is SIGKILLed while agent-1 works on a job: two reads,
the model taking 3 s between them (`scene.SCRIPT`), so the second read runs while choird is
away. A new choird is held after adoption (`choird.start.after_adoption`) — before its gateways
and its metrics endpoint — and the reconnected agent replicates the read then. Its metrics count
it (and the model calls). Before the fix they subscribed once the gateways had started and
counted nothing of the start-up window.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from choir.scripted import ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import (
    START,
    kinds_stored,
    process_scene,
    run,
    script,  # noqa: F401 — the fixture
    start_choird,
    start_work,
)
from tests.faults.support import as_json, kill9
from tests.harness.homes import read_config, write_config
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HOLD_MS = 8000
"""The new choird's start held after adoption: the agent reconnects and replicates meanwhile."""


async def test_what_an_adopted_agent_replicates_while_choird_starts_is_counted(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    async with process_scene(root, pg_params, model.url) as scene:
        data = read_config(scene.home)
        data["metrics"] = {"listen": "unix:socks/metrics.sock"}
        write_config(scene.home, data)
        await start_choird(scene)
        session_id = as_json(await run(scene, *START))["session_id"]
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        work = await start_work(scene)  # the job; its choirctl dies with choird

        async def first_read_stored() -> bool:
            return await _reads_stored() == 1

        async def second_read_stored() -> bool:
            return await _reads_stored() == 2

        async def _reads_stored() -> int:
            return (await kinds_stored(scene, session_id)).count("tool_result_committed")

        await poll_until(first_read_stored, within=30, every=0.2)
        assert scene.choird is not None
        kill9(scene.choird)
        await asyncio.wait_for(work.wait(), 30)
        await asyncio.sleep(5)  # the model's 3 s, then the second read, choird away
        starting = asyncio.create_task(
            start_choird(scene, CHOIR_FAILPOINTS=f"choird.start.after_adoption=sleep({HOLD_MS})")
        )
        await poll_until(second_read_stored, within=60, every=0.1)
        assert not starting.done()  # replicated in the start-up window
        await starting

        families = await asyncio.to_thread(_scrape, scene.home.root / "socks" / "metrics.sock")

    calls = {
        (s.labels["tool"], s.labels["status"]): s.value
        for s in families["choir_tool_calls"].samples
        if s.name == "choir_tool_calls_total" and s.labels["agent"] == "agent-1"
    }
    assert calls == {("choir.fs.read", "success"): 1.0}  # the read done while choird was away
    replicated = families["choir_replication_events"].samples
    assert sum(s.value for s in replicated if s.name.endswith("_total")) >= 2


def _scrape(path: Path) -> dict[str, Metric]:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as http:
        answer = http.get("http://choird/metrics")
    assert answer.status_code == 200, answer.text
    return {family.name: family for family in text_string_to_metric_families(answer.text)}
