"""choird restarting in place (`choird.restart`, `choir restart`): it re-executes itself.

`os.execv` of the same interpreter with the same command line keeps the pid, so everything that
knows choird by its pid stays right: `choir up`'s `choird.lock`, a systemd unit, the process
runtime's agents (still its children, adopted by the new image as after a kill -9) and the
output files it inherited (descriptors 0-2). Every other descriptor Python opens is
close-on-exec (PEP 446), the instance lock's included, so the new image takes the lock again.

A choird that could not exec again — its interpreter or program file gone (a virtualenv
reinstalled underneath it), or no command line to repeat — refuses before it stops anything.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import NoReturn


@dataclass(frozen=True)
class ReExec:
    """How this process runs itself again: the interpreter, and its original command line."""

    executable: str
    argv: tuple[str, ...]
    """`sys.orig_argv`: the interpreter's own options and `-m module` included."""
    program: str
    """`sys.argv[0]`: the script (or the module's file) the command line runs."""

    @classmethod
    def of_this_process(cls) -> ReExec:
        return cls(sys.executable, tuple(sys.orig_argv), sys.argv[0] if sys.argv else "")

    def refusal(self) -> str | None:
        """Why `run` would fail (one line), or None: checked before anything is stopped."""
        if not self.executable or not os.access(self.executable, os.X_OK):
            return f"its interpreter {self.executable or '(unknown)'} is gone or not executable"
        if not self.argv:
            return "its command line is unknown"
        if self.program not in ("", "-c") and not os.path.exists(self.program):
            return f"its program {self.program} is gone (reinstalled or removed since it started)"
        return None

    def run(self) -> NoReturn:
        """Replace this process with a new run of the same command line; never returns. The
        caller has shut its logging down (its handlers flushed: the new image appends)."""
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        os.execv(self.executable, list(self.argv))
