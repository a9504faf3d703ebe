"""choird and choir-agent collect no garbage during their start-up imports (~10-20 % of their
CPU, nothing to free) and collect again once those are loaded, with the start-up's objects
frozen; a process that never turned the collector off (an agent run in a test) is left alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, sys
from choir.agent.app import collect_from_now
if sys.argv[1] == "off":
    gc.disable()
collect_from_now()
print(gc.isenabled(), gc.get_freeze_count() > 0)
"""


def probe(state: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, state],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def test_the_agent_collects_again_after_its_start_up_with_its_modules_frozen() -> None:
    assert probe("off") == "True True"


def test_a_process_that_kept_collecting_freezes_nothing() -> None:
    assert probe("on") == "True False"
