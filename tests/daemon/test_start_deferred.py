"""What a real choird leaves unimported at "choird ready" until first use (issue 13: start-up
time and memory): the operator verbs nobody called, the code of an apply, of a keyed start and
of the restart notice, and the browser worker while `browser.enabled` is false. A verb's first
call imports its module and answers as before."""

from __future__ import annotations

from pathlib import Path

from choir.store.postgres.target import ConnectParams
from tests.harness.homes import external_postgres, make_home
from tests.harness.processes import run_probe

DEFERRED = (
    "choir.daemon.operator.status",
    "choir.daemon.operator.agents.lifecycle",
    "choir.daemon.operator.agents.update",
    "choir.daemon.operator.memory.knowledge",
    "choir.daemon.operator.approvals.config_change",
    "choir.daemon.operator.recovery.inbox",
    "choir.daemon.memory.sealed_backfill",
    "choir.daemon.workers.browser.chromium",
    "choir.daemon.workers.egress_proxy",
)

PROBE = """
import asyncio, sys
from pathlib import Path
from choir.daemon.app import ChoirDaemon, DaemonOptions
from choir.daemon.choird import _operator_handler
from choir.daemon.operator.api import call_verb
from choir.home import ChoirHome

DEFERRED = {deferred!r}

async def main():
    options = DaemonOptions(ChoirHome(Path({home!r})), runtime="process")
    async with ChoirDaemon(options, operator=_operator_handler) as daemon:
        ready = [m for m in DEFERRED if m in sys.modules]
        answer = await call_verb(daemon.operator.context, "status", {{}})
        used = [m for m in DEFERRED if m in sys.modules]
        tools = daemon.services.host_tools.unavailable()
    print(repr((ready, used, sorted(answer), tools.get("choir.web.browse"))))

asyncio.run(main())
"""


def test_choird_is_ready_before_the_verbs_and_workers_it_has_not_used(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    probe = PROBE.format(deferred=DEFERRED, home=str(home.root))
    ready, used, answer, browse = run_probe(probe)
    assert ready == []
    assert used == ["choir.daemon.operator.status"]  # the verb called, nothing else
    assert "agents" in answer
    assert browse.startswith("the browser worker is not running: set browser.enabled")
