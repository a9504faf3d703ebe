"""The logs a failed end-to-end test leaves: tails of choird's and each agent's, choird's first."""

from __future__ import annotations

import gzip
from pathlib import Path

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

    tails = dict(log_tails(tmp_path))

    assert list(tails) == [
        "log h/logs/choird.log",
        "log h/logs/agent-1.log",
        "log h/logs/archive/agent-1/20261128T020000Z.log.gz",
        "log choird-1.stderr",
    ]
    choird = tails["log h/logs/choird.log"].splitlines()
    assert choird[0] == "(5 earlier lines left out)"
    assert choird[1:] == [f"line {n}" for n in range(5, TAIL_LINES + 5)]
    assert tails["log h/logs/archive/agent-1/20261128T020000Z.log.gz"] == "died"
    assert tails["log choird-1.stderr"] == "Traceback: boom"
