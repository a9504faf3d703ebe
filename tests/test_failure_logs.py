"""The logs a failed end-to-end test leaves: tails of choird's and each agent's, choird's first."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script
from tests.harness.daemons import CHOIR_LOGGERS, running_daemon
from tests.harness.failure_logs import TAIL_LINES, log_tails


def test_the_tails_of_choird_and_agent_logs_are_attached_and_empty_ones_left_out(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "h" / "logs"
    (logs / "archive" / "agent-1").mkdir(parents=True)
    (logs / "agent-1.log").write_text("resumed\n")
    (logs / "choird.log").write_text("".join(f"line {n}\n" for n in range(TAIL_LINES + 5)))
    for stamp, text in (("20261128T010000Z", "first run\n"), ("20261128T020000Z", "died\n")):
        (logs / "archive" / "agent-1" / f"{stamp}.log.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "choird-1.stderr").write_text("Traceback: boom\n")
    (tmp_path / "choird-2.stderr").write_text("")
    (tmp_path / "agent.log").write_text("an agent the test launched\n")

    tails = dict(log_tails(tmp_path))

    assert list(tails) == [
        "log h/logs/choird.log",
        "log h/logs/agent-1.log",
        "log h/logs/archive/agent-1/20261128T020000Z.log.gz",
        "log choird-1.stderr",
        "log agent.log",
    ]
    choird = tails["log h/logs/choird.log"].splitlines()
    assert choird[0] == "(5 earlier lines left out)"
    assert choird[1:] == [f"line {n}" for n in range(5, TAIL_LINES + 5)]
    assert tails["log h/logs/archive/agent-1/20261128T020000Z.log.gz"] == "died"
    assert tails["log choird-1.stderr"] == "Traceback: boom"
    assert tails["log agent.log"] == "an agent the test launched"


pytest_plugins = ("pytester",)

FAILING_E2E_TEST = """
from pathlib import Path

import pytest

from tests.e2e_agent.launch import agent_home


def test_times_out(root: Path) -> None:
    agent_home(root)
    (root / "agent.log").write_text('{"msg": "budget question asked"}\\n')
    (root / "h" / "logs").mkdir(parents=True)
    (root / "h" / "logs" / "choird.log").write_text('{"msg": "approval requested"}\\n')
    raise AssertionError("condition not met within 30 s")
"""


def test_a_failed_e2e_agent_test_shows_its_agents_and_choirds_logs(
    pytester: pytest.Pytester,
) -> None:
    """The `root` of an e2e_agent test (what `launch` starts choird and the agent in) is
    registered: its failure report carries the agent's stderr and choird's log."""
    e2e = pytester.mkpydir("e2e_agent")
    (e2e / "test_flaky.py").write_text(FAILING_E2E_TEST)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    (pytester.path / "conftest.py").write_text(
        'pytest_plugins = ("tests.harness.failure_logs", "tests.harness.fixtures")\n'
    )

    # in this process: the snapshot plugin's session end cannot run twice in one
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:textual-snapshot")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- log h/logs/choird.log -*",
            '{"msg": "approval requested"}',
            "*- log agent.log -*",
            '{"msg": "budget question asked"}',
        ]
    )


@pytest.fixture
def script() -> Script:
    return Script(steps=[ReplyStep(text="hi")])  # no agent runs: nothing asks the model


async def test_an_in_process_choird_writes_its_info_lines_to_its_log(home: ChoirHome) -> None:
    """`running_daemon` has no `choird` command line to set up logging: the harness writes
    choir's INFO lines to `logs/choird.log`, as choird does, for `log_tails` to attach; choir's
    loggers and the root logger are as they were afterwards."""
    root = logging.getLogger()
    handlers, levels = list(root.handlers), [logging.getLogger(n).level for n in CHOIR_LOGGERS]

    async with running_daemon(home):
        pass

    lines = [json.loads(line) for line in home.choird_log.read_text().splitlines()]
    messages = [line["message"] for line in lines]
    assert {"choird ready", "choird stopped"} <= set(messages)
    assert {line["source"] for line in lines} == {"choird"}
    assert root.handlers == handlers
    assert [logging.getLogger(n).level for n in CHOIR_LOGGERS] == levels
