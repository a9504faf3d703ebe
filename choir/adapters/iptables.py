"""iptables, through its own command-line tools: the few calls egress filtering needs.

Every call waits for the xtables lock (`-w`), so two choirds (or dockerd) changing rules at
once never fail each other; a failure becomes one `ChoirError` line with iptables' own word.
Blocking (short subprocesses): callers run these in a worker thread.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import Final

from choir.errors import ChoirError

TIMEOUT_S: Final = 20.0
"""Longest one call may wait (mostly for the xtables lock)."""


def unavailable() -> str | None:
    """Why choird cannot manage iptables rules here, or None when it can."""
    if os.geteuid() != 0:
        return "choird is not root"
    if shutil.which("iptables") is None or shutil.which("iptables-restore") is None:
        return "iptables is not installed (apt-get install iptables)"
    return None


def restore(script: str) -> None:
    """Apply `script` without flushing the table: the chains it declares are replaced whole."""
    _run(["iptables-restore", "-w", "--noflush"], stdin=script)


def chain_exists(chain: str) -> bool:
    return _try(["iptables", "-w", "-S", chain])


def listing(chain: str) -> str:
    """`iptables -S <chain>`."""
    return _run(["iptables", "-w", "-S", chain])


def has_rule(chain: str, rule: Sequence[str]) -> bool:
    return _try(["iptables", "-w", "-C", chain, *rule])


def insert_first(chain: str, rule: Sequence[str]) -> None:
    _run(["iptables", "-w", "-I", chain, "1", *rule])


def ensure_chain(chain: str) -> None:
    """`chain` made (empty) when it does not exist; left as it is when it does."""
    if not chain_exists(chain):
        try:
            _run(["iptables", "-w", "-N", chain])
        except ChoirError:
            if not chain_exists(chain):  # not another choird's make just now
                raise


def append(chain: str, rule: Sequence[str]) -> None:
    _run(["iptables", "-w", "-A", chain, *rule])


def delete(chain: str, rule: Sequence[str]) -> None:
    _run(["iptables", "-w", "-D", chain, *rule])


def _try(argv: list[str]) -> bool:
    try:
        _run(argv)
    except ChoirError:
        return False
    return True


def _run(argv: list[str], *, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ChoirError(f"{argv[0]} failed: {error}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise ChoirError(f"{' '.join(argv[:4])} failed: {said[-1] if said else done.returncode}")
    return done.stdout
