"""choird's start leaves the embedding stack unloaded: a real choird, in a fresh interpreter on
the test's Postgres, has not imported numpy, wordllama or the providers when it is ready; its
memory service loads them at first use, and then embeds."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from choir.store.postgres.target import ConnectParams
from tests.harness.homes import external_postgres, make_home

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "numpy",
    "wordllama",
    "tokenizers",
    "httpx",
    "choir.daemon.memory.queue",
    "choir.daemon.memory.local_provider",
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
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ready, used, shape = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert ready == []
    assert set(used) >= {"numpy", "wordllama", "choir.daemon.memory.local_provider"}
    assert shape == (256,)  # the local model, as configured by default
