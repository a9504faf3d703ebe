"""Ctrl-C (SIGINT) ends choirctl at any moment: exit code 130, no traceback.

The followed streams (`logs`, `session events --follow`) are interrupted while choird has nothing
to send, with the test process's own SIGINT default, ignored or blocked: a suite started in the
background by a non-interactive shell (`.ci/run > ci.log &`) runs with it ignored and hands that
to what it starts, and a choirctl started so ignores SIGINT (as Python and `tail -f` do), so
tests start it as a terminal does (`tests.ctl.cli.as_foreground`). Start-up is interrupted in the
middle of its imports, at a chosen module (choirctl signals itself, so the moment is exact).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from choir.home import ChoirHome
from choir.protocol import Verb
from tests.daemon.agent import AgentClient, Chain
from tests.daemon.operator_served import Operator, served_operator  # noqa: F401  (fixture)

from .cli import REPO_ROOT, as_foreground, start_choirctl

INHERITED = ("default", "ignored", "blocked")
"""SIGINT's state in the test process when it starts choirctl."""
PROMPT_S = 10.0
"""How long choirctl may take to exit after SIGINT (well under a second unloaded)."""


@contextmanager
def sigint(state: str) -> Iterator[None]:
    """This process's SIGINT in `state` for the block; a process started in it inherits that."""
    if state == "ignored":
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
    elif state == "blocked":
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    else:
        yield


async def interrupted(home: ChoirHome, args: list[str], lines: int, state: str) -> tuple[int, str]:
    """Start `choirctl args` (SIGINT `state` here), read `lines` lines, send SIGINT: its exit code
    and stderr; code -1 if it outlived the signal by PROMPT_S (then it is killed)."""
    with sigint(state):
        process = await start_choirctl(home.root, *args)
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            for _ in range(lines):
                assert await process.stdout.readline() != b"", "choirctl ended before following"
        process.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(PROMPT_S):
                _, err = await process.communicate()  # drained: a full pipe cannot hold it
        except TimeoutError:
            return -1, f"outlived its SIGINT by {PROMPT_S} s"
        return process.returncode if process.returncode is not None else -1, err.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_logs_follow_stops_on_ctrl_c_with_nothing_to_send(operator: Operator):
    home = operator.home
    home.choird_log.parent.mkdir(parents=True, exist_ok=True)
    home.choird_log.write_text('{"msg": "one"}\n')

    outcomes = {state: await interrupted(home, ["logs", "choird"], 1, state) for state in INHERITED}

    assert outcomes == dict.fromkeys(INHERITED, (130, ""))


async def test_session_events_follow_stops_on_ctrl_c_with_nothing_to_send(operator: Operator):
    services = operator.services
    agent = AgentClient(services, await services.sessions.start("agent-1", {}))
    chain = Chain()
    chain.commit(2)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    args = ["session", "events", agent.session_id, "--follow"]

    outcomes = {state: await interrupted(operator.home, args, 2, state) for state in INHERITED}

    assert outcomes == dict.fromkeys(INHERITED, (130, ""))


def interrupted_at_import(module: str) -> str:
    """choirctl's entry point, sending itself SIGINT as `module` starts to be imported."""
    return f"""
import os, signal, sys

class InterruptAt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptAt())
sys.argv[0] = "choirctl"
from choir.ctl.app import main
main()
"""


@pytest.mark.parametrize(
    "module",
    [
        "typer",  # the command-line parser, before any command is known
        "choir.ctl.sessions.logs",  # the noun named on the command line, registered before it runs
        "choir.client",  # the command runs: before it connects to choird
    ],
)
def test_ctrl_c_while_choirctl_starts(tmp_path: Path, module: str) -> None:
    env = {"PYTHONPATH": str(REPO_ROOT), "CHOIR_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-c", interrupted_at_import(module), "logs", "choird"]
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=60, preexec_fn=as_foreground
    )

    assert (done.returncode, done.stderr) == (130, "")
