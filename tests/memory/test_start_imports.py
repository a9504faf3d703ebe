"""choird's start leaves the embedding stack unloaded: a real choird, in a fresh interpreter on
the test's Postgres, has not imported numpy, wordllama or the providers when it is ready; its
memory service loads them at first use, and then embeds."""

from __future__ import annotations

from pathlib import Path

from choir.store.postgres.target import ConnectParams
from tests.harness.homes import external_postgres, make_home
from tests.harness.processes import run_probe

HEAVY = (
    "numpy",
    "wordllama",
    "tokenizers",
    "httpx",
    "choir.daemon.memory.embedding.queue",
    "choir.daemon.memory.embedding.local_provider",
)

PROBE = """
import asyncio, sys
from pathlib import Path
from choir.daemon.app import ChoirDaemon, DaemonOptions
from choir.home import ChoirHome

HEAVY = {heavy!r}

async def main():
    options = DaemonOptions(ChoirHome(Path({home!r})), runtime="process")
    async with ChoirDaemon(options) as daemon:
        ready = [m for m in HEAVY if m in sys.modules]
        vector = await daemon.memory.embed_query("where is the config?", timeout_s=60)
        used = [m for m in HEAVY if m in sys.modules]
    print(repr((ready, used, None if vector is None else vector.shape)))

asyncio.run(main())
"""


def test_choird_is_ready_before_the_embedding_stack_loads(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    probe = PROBE.format(heavy=HEAVY, home=str(home.root))
    ready, used, shape = run_probe(probe)
    assert ready == []
    assert set(used) >= {"numpy", "tokenizers", "choir.daemon.memory.embedding.local_provider"}
    assert shape == (256,)  # the local model, as configured by default


IDLE_PROBE = """
import asyncio, sys
from pathlib import Path
from choir.daemon.app import MEMORY_START_DELAY_S, ChoirDaemon, DaemonOptions
from choir.home import ChoirHome

async def main():
    options = DaemonOptions(ChoirHome(Path({home!r})), runtime="process")
    async with ChoirDaemon(options) as daemon:
        await asyncio.sleep(MEMORY_START_DELAY_S + 1.5)
        idle = (daemon.memory_ready.is_set(), "numpy" in sys.modules)
        await asyncio.wait_for(daemon.memory_started(), 60)
        wanted = (daemon.memory_ready.is_set(), "choir.daemon.memory.store" in sys.modules)
    print(repr((idle, wanted)))

asyncio.run(main())
"""


def test_memory_with_nothing_to_do_loads_with_its_first_work(
    root: Path, pg_params: ConnectParams
) -> None:
    """A fresh home has no session to close and no row to embed: choird keeps numpy, the store
    and their Postgres connections unloaded (~25 MB of the stack) until memory is wanted."""
    home = make_home(root, postgres=external_postgres(pg_params))
    idle, wanted = run_probe(IDLE_PROBE.format(home=str(home.root)))
    assert idle == (False, False)
    assert wanted == (True, True)
