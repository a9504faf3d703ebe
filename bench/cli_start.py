"""choirctl start-up: wall time of whole `choirctl` processes, as the operator runs them.

- choirctl_status_ms: `choirctl status` against a running choird (its embedded Postgres up),
  spawn to exit, median of runs: interpreter start, imports, socket round trip, rendering.
- choirctl_help_ms: `choirctl --help`, median of runs: imports and typer alone.

Each run is a fresh process ("cold" for Python; the page cache stays warm, as it does for an
operator typing commands).

    python -m bench.cli_start [--json] [--quick]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.common import compile_bytecode, median, parse_args, report

BIN = Path(sys.executable).parent
GOALS = {
    "choirctl_status_ms": "goal <= 150",
    "choirctl_help_ms": "goal <= 100",
}
READY_TIMEOUT_S = 60.0


def run_ms(command: Sequence[str], env: dict[str, str]) -> float:
    """Milliseconds from spawn to exit of `command`, which must succeed."""
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


@contextmanager
def running_choird(home: Path, env: dict[str, str]) -> Iterator[None]:
    """`choirctl init`, then `choird` until "choird ready" is in its log; SIGTERM after."""
    subprocess.run([str(BIN / "choirctl"), "init"], env=env, check=True, capture_output=True)
    log = home / "logs" / "choird.log"
    process = subprocess.Popen([str(BIN / "choird"), "--quiet"], env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (log.exists() and "choird ready" in log.read_text()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"choird did not start; see {log}")
            time.sleep(0.05)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def measure(quick: bool) -> dict[str, float]:
    runs = 5 if quick else 10
    with tempfile.TemporaryDirectory(prefix="cs-", dir="/tmp") as root:
        home = Path(root) / "h"
        env = {**os.environ, "CHOIR_HOME": str(home)}
        with running_choird(home, env):
            status = [BIN / "choirctl", "status"]
            run_ms([str(p) for p in status], env)  # warm the page cache once
            status_ms = [run_ms([str(p) for p in status], env) for _ in range(runs)]
        help_ms = [run_ms([str(BIN / "choirctl"), "--help"], env) for _ in range(runs)]
    return {"choirctl_status_ms": median(status_ms), "choirctl_help_ms": median(help_ms)}


def main() -> None:
    args = parse_args(__doc__ or "")
    compile_bytecode()
    report("choirctl wall time per command (ms)", measure(args.quick), GOALS, args.json)


if __name__ == "__main__":
    main()
