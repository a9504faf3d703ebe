"""choird's instance lock (`choir.daemon.instance_lock`): one choird per home, and a stopped
choird's lock free at once, also while a process it started still shares the lock's file.

Any thread's subprocess shares every open file of choird between its fork and its exec (the
close-on-exec flag closes it only at the exec): a lock released by closing the descriptor
alone stayed held by such a child, and a choird restarted in that instant was refused as
"already running" (the flaky `test_host_tool_dedupe` restart: a repo-fetch thread was starting
git as the first choird stopped).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from choir.daemon.instance_lock import InstanceLock
from choir.errors import ConflictError


def descriptor_of(path: Path) -> int:
    """This process's descriptor open on `path`."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                return int(name)
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
    raise AssertionError(f"no descriptor open on {path}")


def test_a_second_lock_on_the_home_is_refused_naming_the_holder(tmp_path: Path) -> None:
    lock = InstanceLock(tmp_path)
    lock.acquire()
    try:
        with pytest.raises(ConflictError, match=f"already running .*pid {os.getpid()}"):
            InstanceLock(tmp_path).acquire()
    finally:
        lock.release()


def test_a_released_lock_is_free_while_a_child_still_shares_its_file(tmp_path: Path) -> None:
    lock = InstanceLock(tmp_path)
    lock.acquire()
    # a child holding the lock's open file, as one between its fork and its exec does; kept
    # across the exec here, so that instant lasts as long as the test needs
    child = subprocess.Popen(["sleep", "60"], pass_fds=[descriptor_of(lock.path)])
    try:
        lock.release()
        again = InstanceLock(tmp_path)
        again.acquire()  # the restarted choird: not "already running"
        again.release()
    finally:
        child.kill()
        child.wait()
