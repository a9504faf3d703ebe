"""How a restarted choird recognises an agent process a previous one started (`process.json`):
its pid and its start time, which must not depend on the wall clock.

A real process (its command line naming choir-agent, as the sandbox wrapper's does) is
recorded as `record_process` does at an agent's start. The wall clock then steps by a second —
NTP, or a VM paused under load — which moves the boot time psutil adds to a process's start
(`/proc/stat` btime is the wall clock minus the uptime). Before the fix the record compared
that wall-clock start and the live agent was taken for a stranger: the next choird crashed its
session ("its agent no longer runs") and killed it, and `choirctl chat` answered exit 5,
"agent-1 is not running".
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from psutil import _pslinux

from choir.daemon.runtimes.adopt import (
    ProcessRecord,
    record_path,
    record_process,
    recorded_processes,
)
from choir.home import ChoirHome


@pytest.fixture
def agent() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose command line names choir-agent."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "choir-agent"]
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def home(tmp_path: Path) -> ChoirHome:
    return ChoirHome(tmp_path / "h")


def test_a_wall_clock_step_after_the_agent_started_does_not_make_it_a_stranger(
    home: ChoirHome, agent: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    record_process(home, "agent-1", "s-1", agent.pid)
    [record] = recorded_processes(home)
    assert record.alive()

    stepped = _pslinux.boot_time() + 1.0  # the clock stepped 1 s since the agent started
    monkeypatch.setattr(_pslinux, "boot_time", lambda: stepped)
    assert abs(psutil.Process(agent.pid).create_time() - record.started) >= 1.0

    assert record.alive()


def test_a_pid_that_now_belongs_to_another_process_is_not_the_agent(
    home: ChoirHome, agent: subprocess.Popen[bytes]
) -> None:
    record_process(home, "agent-1", "s-1", agent.pid)
    [record] = recorded_processes(home)
    assert record.start_ticks is not None
    reused = ProcessRecord(
        "agent-1", "s-1", agent.pid, record.started, start_ticks=record.start_ticks - 1
    )
    assert not reused.alive()


def test_a_record_written_before_start_ticks_is_read_by_its_wall_clock_start(
    home: ChoirHome, agent: subprocess.Popen[bytes]
) -> None:
    record_process(home, "agent-1", "s-1", agent.pid)
    path = record_path(home, "agent-1")
    data = json.loads(path.read_text())
    del data["start_ticks"]
    path.write_text(json.dumps(data))

    [record] = recorded_processes(home)
    assert record.start_ticks is None
    assert record.alive()
    assert not ProcessRecord("agent-1", "s-1", agent.pid, record.started - 1).alive()
