"""A subreaper: run one command, then end every process it left behind. Standard library only.

    python -I -S subreaper.py [--grace S] [--forward] [--parent PID] [--report] -- COMMAND [ARG...]

Why: a process group does not hold a tree. `setsid sleep 1000 &` or a double fork leaves the
group, and the orphan is adopted by PID 1, where nothing that started it can find it any more.
Linux adopts orphans to their nearest ancestor marked `PR_SET_CHILD_SUBREAPER` instead, so every
process the command starts, however it detaches, stays a descendant of this one — and this one
ends them all: when the command exits, or when this process gets SIGTERM, SIGINT or SIGHUP, every
remaining descendant gets SIGTERM, then SIGKILL after the grace; then it exits as the command did
(its exit code, or killed by the same signal), so a caller sees the command's own status.

Uses: `choir.exec` runs each command under one (`--parent <agent pid>`: the tree also ends if
the agent dies), and the process runtime runs an unsandboxed choir-agent under one (`--forward`:
signals go to the agent alone, which stops gracefully; its leftovers end when it exits), and
`./dev test` runs each pytest pass under one (`--forward --report`: a test run that is killed, or
a test that leaks a choird or a Postgres, leaves nothing running, and the leak is named).

It is run by path, not imported (`-I -S`: no site-packages, ~20 ms to start), and never forks
in Python: the command is started with posix_spawn. Signals are blocked and taken with
`sigtimedwait`, so no handler interrupts the bookkeeping.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WATCHED = {*STOPS, signal.SIGCHLD}
RESET = (signal.SIGPIPE, signal.SIGXFSZ, *STOPS, signal.SIGCHLD)
"""Dispositions the command gets back at their defaults (Python ignores SIGPIPE and SIGXFSZ)."""
KILL_ROUNDS_S = 10.0
"""How long SIGKILL rounds may go on (a fork bomb racing them) before giving up."""
USAGE = "[--grace S] [--forward] [--parent PID] [--report] -- COMMAND [ARG...]"
_TICK_S = 0.02
NAME_CHARS = 120
"""How much of a leftover's command line the report shows."""


class Tree:
    """This process's descendants, and the exit status of the command among them."""

    def __init__(self, command: int) -> None:
        self.command = command
        self.status: int | None = None

    def reap(self) -> None:
        """Collect every child that has exited, without waiting."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.command:
                self.status = status

    def live(self) -> list[int]:
        """Every descendant still running (zombies are dead and only wait to be reaped)."""
        children: dict[int, list[int]] = {}
        running: set[int] = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as file:
                    fields = file.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(name))
            if fields[0] not in (b"Z", b"X"):
                running.add(int(name))
        found, todo = [], list(children.get(os.getpid(), []))
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return [pid for pid in found if pid in running]

    def signal_all(self, signum: int) -> None:
        for pid in self.live():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def end(self, grace: float) -> None:
        """SIGTERM to every descendant, SIGKILL to what is left after `grace`, all reaped."""
        self.reap()
        if not self.live():
            return
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            signal.sigtimedwait({signal.SIGCHLD}, _TICK_S)
            self.reap()
            if not self.live():
                return
        deadline = time.monotonic() + KILL_ROUNDS_S
        while time.monotonic() < deadline:
            self.signal_all(signal.SIGKILL)
            signal.sigtimedwait({signal.SIGCHLD}, _TICK_S)
            self.reap()
            if not self.live():
                return


def main(argv: list[str]) -> int:
    grace, forward, parent, report, command = _parse(argv)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    if parent is not None:  # SIGTERM (taken by _wait) when the parent dies
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # it died before the signal was armed
            os.kill(os.getpid(), signal.SIGTERM)
    tree = Tree(_spawn(command, new_session=forward))
    _wait(tree, forward)
    if report:
        _report(tree)
    tree.end(grace)
    if tree.status is None:
        _, tree.status = os.waitpid(tree.command, 0)
    return _exit_as(tree.status)


def _report(tree: Tree) -> None:
    """Name on stderr what is still running, before it is ended."""
    tree.reap()
    left = tree.live()
    if left:
        named = ", ".join(f"{pid} {_name(pid)}" for pid in sorted(left))
        message = f"subreaper: ending {len(left)} process(es) left running: {named}\n"
        with contextlib.suppress(OSError):  # a closed stderr must not keep them from ending
            sys.stderr.write(message)
            sys.stderr.flush()


def _name(pid: int) -> str:
    """The process's command line, cut short (its name when it has none: a kernel thread or a
    zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            words = file.read().split(b"\0")
        line = " ".join(b" ".join(words).decode(errors="replace").split())
        if not line:
            with open(f"/proc/{pid}/comm") as file:
                line = file.read().strip()
    except OSError:
        return "?"
    return line if len(line) <= NAME_CHARS else line[: NAME_CHARS - 1] + "…"


def _parse(argv: list[str]) -> tuple[float, bool, int | None, bool, list[str]]:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print(f"usage: subreaper.py {USAGE}", file=sys.stderr)
        raise SystemExit(2)
    options, command = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    grace = float(_option(options, "--grace") or 1.0)
    parent = _option(options, "--parent")
    forward, report = "--forward" in options, "--report" in options
    return grace, forward, int(parent) if parent else None, report, command


def _option(options: list[str], name: str) -> str | None:
    return options[options.index(name) + 1] if name in options else None


def _spawn(command: list[str], *, new_session: bool) -> int:
    try:
        return os.posix_spawnp(
            command[0],
            command,
            os.environ,
            setsid=new_session,
            setsigmask=(),
            setsigdef=RESET,
        )
    except OSError as error:
        print(f"subreaper: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
        raise SystemExit(127) from None


def _wait(tree: Tree, forward: bool) -> None:
    """Until the command exits; a stop signal ends the wait, or is passed on with --forward."""
    while tree.status is None:
        info = signal.sigwaitinfo(WATCHED)
        if info.si_signo == signal.SIGCHLD:
            tree.reap()
        elif forward:
            with contextlib.suppress(ProcessLookupError):
                os.kill(tree.command, info.si_signo)
        else:
            return


def _exit_as(status: int) -> int:
    """The command's exit code; if a signal killed it, die of the same signal."""
    if not os.WIFSIGNALED(status):
        return os.waitstatus_to_exitcode(status)
    signum = os.WTERMSIG(status)
    with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no disposition
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    return 128 + signum


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
