"""A probe that tries to read choir-agent's memory, environment and file descriptors.

It is run as a tool would run (a `choir.exec` command, or `docker exec` in the agent's
container: the agent's uid, its capabilities — none), so it is plain Python with no choir
import. `python3 memory_probe.py <hex of a canary>` prints one JSON object: for every
choir-agent process it can see, and for PID 1, what happened when it tried `environ`, `fd/`
and `mem` (`read`, `found` when the canary was in what it read, or the error's name). The
canary goes in as hex so that neither the command line nor the tool call holds it. A second
argument narrows the agents to those whose command line has it (on a shared host: this test's
home, so another test's agent is not probed).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from functools import partial

MAX_REGION = 64 * 1024 * 1024


def targets(narrow: bytes) -> list[str]:
    found = ["1"]
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                cmdline = file.read()
        except OSError:
            continue
        if b"choir-agent" in cmdline and narrow in cmdline and b"git-cred-helper" not in cmdline:
            found.append(name)
    return found


def attempt(read: Callable[[], bytes], needle: bytes) -> str:
    try:
        data = read()
    except OSError as error:
        return type(error).__name__
    return "found" if needle in data else "read"


def environ(pid: str) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as file:
        return file.read()


def fds(pid: str) -> bytes:
    names = os.listdir(f"/proc/{pid}/fd")
    return "\n".join(os.readlink(f"/proc/{pid}/fd/{fd}") for fd in names).encode()


def memory(pid: str, needle: bytes) -> bytes:
    """Every readable mapping, searched as it is read; the needle alone when it is found."""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem, open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            match = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not match:
                continue
            start, end = (int(part, 16) for part in match.groups())
            try:
                mem.seek(start)
                chunk = mem.read(min(end - start, MAX_REGION))
            except OSError:
                continue
            if chunk and needle in chunk:
                return needle
    return b""


def main() -> None:
    needle = bytes.fromhex(sys.argv[1])
    narrow = sys.argv[2].encode() if len(sys.argv) > 2 else b""
    report = {}
    for pid in targets(narrow):
        report[pid] = {
            "environ": attempt(partial(environ, pid), needle),
            "fd": attempt(partial(fds, pid), needle),
            "mem": attempt(partial(memory, pid, needle), needle),
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
