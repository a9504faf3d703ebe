"""`agent build` with nothing changed (§17.3): how long until the image is known up to date.

A fresh home from `choirctl init` (local global and agent repos), one real build first (the
base image comes from the engine's layer cache when an earlier run built it), then repeated
builds with nothing changed: each fetches (reads) the repos, merges and checks the `/choir`
tree, hashes the build context and finds the image by its labels — no docker build runs. Also
timed once: a rebuild after a commit to the agent repo (the base image is reused).

Needs a Docker engine with the base OS image (scripts/ensure-docker). The wheelhouse cache is
`$CHOIR_BUILD_CACHE`, else a directory under the system temp dir kept between runs.

    python -m bench.build [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import docker
import docker.errors

from bench.common import median, parse_args, report
from choir.config import init_home, load_home
from choir.config.scaffolding.gitrepo import git
from choir.daemon.images.build import BuildProgress, ImageRef, ensure_agent_image
from choir.home import ChoirHome

GOALS = {
    "noop_build_s": "goal <= 2.0 (median)",
    "noop_build_max_s": "",
    "agent_rebuild_s": "(one sample; base reused)",
}
AGENT = "agent-1"


def _note(item: BuildProgress) -> None:
    if item.log is None and item.detail:
        print(f"  [{item.step}/10] {item.title}: {item.detail}", file=sys.stderr)


async def _timed_build(home: ChoirHome, progress: object = None) -> tuple[float, ImageRef]:
    config = load_home(home).config
    started = time.perf_counter()
    ref = await ensure_agent_image(home, config, AGENT, _note if progress else None)
    return time.perf_counter() - started, ref


async def run(samples: int, verbose: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="choir-bench-build-") as scratch:
        home = ChoirHome(Path(scratch) / "home")
        init_home(home)
        if verbose:
            print("first build (base image from the layer cache if built before)", file=sys.stderr)
        _, first = await _timed_build(home, progress=verbose)
        noop = []
        for _ in range(samples):
            elapsed, ref = await _timed_build(home)
            if ref.built:
                raise SystemExit(
                    "a build with nothing changed ran docker build: is choir's "
                    "source tree being edited while the benchmark runs?"
                )
            noop.append(elapsed)
        repo = home.sources / "agents" / AGENT
        (repo / "identity" / "SOUL.md").write_text("A benchmark changed this soul.\n")
        git(repo, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-am", "bench change")
        rebuild, second = await _timed_build(home)
        _remove_images([first.id, second.id])
    return {
        "noop_build_s": median(noop),
        "noop_build_max_s": max(noop),
        "agent_rebuild_s": rebuild,
    }


def _remove_images(ids: list[str]) -> None:
    """The benchmark's agent images (the shared base image stays as cache)."""
    client = docker.from_env()
    try:
        for image_id in ids:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(image_id, force=True)
    finally:
        client.close()


def main() -> None:
    args = parse_args("agent build: a no-op build (nothing changed), and a rebuild")
    os.environ.setdefault(
        "CHOIR_BUILD_CACHE", str(Path(tempfile.gettempdir()) / f"choir-bench-build-{os.getuid()}")
    )
    figures = asyncio.run(run(3 if args.quick else 5, verbose=not args.json))
    report("agent build (seconds)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
