"""The Chromium this test process started (through Playwright's driver, in choird's browser
worker running in-process): to kill it mid-session."""

from __future__ import annotations

import os

import psutil


def chromium_processes() -> list[psutil.Process]:
    """The main Chromium browser processes among this process's descendants (not its
    renderers, GPU or utility processes, which carry `--type=`)."""
    me = psutil.Process(os.getpid())
    return [
        child
        for child in me.children(recursive=True)
        if "chrom" in child.name() and "--type=" not in " ".join(child.cmdline())
    ]
