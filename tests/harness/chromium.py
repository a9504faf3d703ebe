"""The Chromium this test process started (through Playwright's driver, in choird's browser
worker running in-process): to kill it mid-session."""

from __future__ import annotations

import os
import shutil

import psutil
import pytest

CHROMIUM = "/usr/bin/chromium"
"""Where Debian's package puts it: the browser worker's default `browser.executable`."""


def require_chromium() -> None:
    """Skip without Chromium — or fail in CI, which installs it (`.ci/run`)."""
    if shutil.which(CHROMIUM):
        return
    problem = f"{CHROMIUM} is not installed (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(problem, pytrace=False)
    pytest.skip(problem)


def chromium_processes() -> list[psutil.Process]:
    """The main Chromium browser processes among this process's descendants (not its
    renderers, GPU or utility processes, which carry `--type=`)."""
    me = psutil.Process(os.getpid())
    return [
        child
        for child in me.children(recursive=True)
        if "chrom" in child.name() and "--type=" not in " ".join(child.cmdline())
    ]
