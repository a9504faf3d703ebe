"""Shared harness for `python -m bench.<name>`: a table by default, one JSON object with --json."""

from __future__ import annotations

import argparse
import compileall
import json
import statistics
from collections.abc import Sequence
from typing import Any


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print one JSON object of the figures")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    return parser.parse_args(argv)


def compile_bytecode() -> None:
    """Write choir's bytecode, as `pip install` does: start-up benches measure an installed
    choir. A checkout run with PYTHONDONTWRITEBYTECODE=1 (as on the dev machines) has none,
    and every process started from it would compile each module from source (~0.6 s for
    choird, ~0.2 s for choir-agent) — a cost no installed choir pays."""
    import choir

    for folder in choir.__path__:
        compileall.compile_dir(folder, quiet=1)


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; `pct` in 0..100."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def report(title: str, figures: dict[str, float], goals: dict[str, str], as_json: bool) -> None:
    """Print figures as a table (with the goal next to each) or as one JSON object."""
    if as_json:
        print(json.dumps({k: round(v, 4) for k, v in figures.items()}))
        return
    print(title)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        goal = goals.get(key, "")
        print(f"  {key.ljust(width)}  {value:>14,.4f}  {goal}")


def figures_dict(**figures: Any) -> dict[str, float]:
    return {k: float(v) for k, v in figures.items()}
