"""A failed end-to-end test's choird and agent logs, attached to its report.

The homes of end-to-end tests live in a short directory under /tmp that is removed when the test
ends (`root`, `fault_root`), so a test that failed once in CI (a race under load) would leave
nothing to read. A fixture that makes such a directory registers it with `keep_logs_of`; when
the test fails (setup or call), the report gets one section per log found under it — the tail
of `logs/choird.log`, of each `logs/agent-*.log` and of each agent's latest archive (choird
archives an agent's log when the agent exits), choird's own stderr, and the stderr of an agent a
test launched itself (`tests/e2e_agent/launch.py`: `<root>/agent.log`) — shown with the failure
like captured output, also from an xdist worker.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import Final

import pytest

TAIL_LINES: Final = 80
"""Lines kept of each log: what led to the failure, not the whole run."""

ROOTS: Final = pytest.StashKey[list[Path]]()


def keep_logs_of(node: pytest.Item | pytest.Collector, root: Path) -> None:
    """Attach the logs found under `root` to the report of `node` if it fails."""
    node.stash.setdefault(ROOTS, []).append(root)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and report.when in ("setup", "call"):
        for root in item.stash.get(ROOTS, []):
            for title, text in log_tails(root):
                report.sections.append((title, text))
    return report


def log_tails(root: Path) -> list[tuple[str, str]]:
    """(title, last lines) of every choird/agent log under `root`, choird's first."""
    found = sorted(root.glob("*/logs/*.log"), key=lambda p: (p.name != "choird.log", p.name))
    found += [
        archives[-1]
        for d in sorted(root.glob("*/logs/archive/*"))
        if (archives := sorted(d.glob("*.gz")))
    ]
    found += sorted(root.glob("choird-*.stderr"))
    found += sorted(root.glob("*.log"))  # agents launched by the test, not by choird
    tails = [(f"log {path.relative_to(root)}", _tail(path)) for path in found]
    return [(title, text) for title, text in tails if text]


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        return f"(unreadable: {error})"
    lines = data.decode(errors="replace").splitlines()
    cut = f"({len(lines) - TAIL_LINES} earlier lines left out)\n" if len(lines) > TAIL_LINES else ""
    return cut + "\n".join(lines[-TAIL_LINES:])
