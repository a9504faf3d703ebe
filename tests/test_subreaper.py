"""`choir/subreaper.py` as `./dev test` runs pytest under it (`--forward --report`): a killed run,
or one whose tests leak processes, leaves nothing running, and the leak is named."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

from choir import subreaper
from tests.harness.processes import environment, gone

SUBREAPER = Path(subreaper.__file__)

DETACHES = textwrap.dedent(
    """
    import subprocess, sys
    # a double fork out of the process group, as pg_ctl starts a postmaster
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    print(child.pid, flush=True)
    sys.exit(int(sys.argv[1]))
    """
)


def reaped(*command: str, report: bool = True) -> subprocess.Popen[str]:
    options = ["--forward", "--grace", "2", *(["--report"] if report else [])]
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(SUBREAPER), *options, "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )


def test_a_process_left_running_is_named_and_ended_and_the_exit_code_kept() -> None:
    run = reaped(sys.executable, "-c", DETACHES, "3")
    out, err = run.communicate(timeout=30)
    left = int(out.split()[0])
    assert run.returncode == 3
    assert gone(left)
    assert f"subreaper: ending 1 process(es) left running: {left} sleep 300" in err


def test_a_closed_stderr_does_not_keep_what_is_left_from_ending() -> None:
    """The reader of the report went away (a test run piped into `head`, a killed caller)."""
    run = reaped(sys.executable, "-c", "import time; time.sleep(0.5); " + DETACHES, "0")
    assert run.stdout is not None
    assert run.stderr is not None
    run.stderr.close()
    left = int(run.stdout.readline())
    run.wait(timeout=30)
    run.stdout.close()
    assert gone(left)


def test_nothing_left_says_nothing() -> None:
    run = reaped(sys.executable, "-c", "print('done')")
    out, err = run.communicate(timeout=30)
    assert (run.returncode, out, err) == (0, "done\n", "")


def test_without_report_what_is_left_is_ended_silently() -> None:
    run = reaped(sys.executable, "-c", DETACHES, "0", report=False)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 0
    assert err == ""
    assert gone(int(out.split()[0]))


def test_sigterm_goes_to_the_command_which_exits_first_then_its_leftovers_end(
    tmp_path: Path,
) -> None:
    """`timeout` stopping a test run: pytest gets the signal (and may tear down); the
    postmaster-like leftover is ended afterwards, not killed under its parent."""
    marker = tmp_path / "stopped"
    waits = textwrap.dedent(
        f"""
        import signal, subprocess, sys, time
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        def stop(*_):
            open({str(marker)!r}, "w").write(str(child.poll()))  # its leftover still runs
            sys.exit(4)
        signal.signal(signal.SIGTERM, stop)
        print(child.pid, flush=True)
        time.sleep(300)
        """
    )
    run = reaped(sys.executable, "-c", waits)
    assert run.stdout is not None
    left = int(run.stdout.readline())
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 4
    assert marker.read_text() == "None"
    assert gone(left)
    assert f"{left} sleep 300" in err


def is_postmaster(process: psutil.Process) -> bool:
    return process.name() == "postgres" and "-D" in process.cmdline()


def test_a_killed_run_leaves_no_postgres(tmp_path: Path) -> None:
    """The worst moment: the test process is SIGKILLed while its embedded Postgres runs (no
    teardown at all). The postmaster pg_ctl detached is the subreaper's, and ends with it."""
    starts = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from choir.store.postgres.embedded import EmbeddedPostgres
        server = EmbeddedPostgres(Path({str(tmp_path / "data")!r}))
        server.start()
        print("ready", flush=True)
        time.sleep(300)
        """
    )
    run = reaped(sys.executable, "-c", starts)
    try:
        assert run.stdout is not None
        assert run.stdout.readline() == "ready\n", run.communicate(timeout=30)
        reaper = psutil.Process(run.pid)
        (command,) = (p for p in reaper.children() if not is_postmaster(p))
        (postmaster,) = (p for p in reaper.children(recursive=True) if is_postmaster(p))
        command.kill()
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:  # a failed assertion: the server still ends with the subreaper
            run.terminate()
            run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL  # the command's own fate, passed on
    deadline = time.monotonic() + 10
    while not gone(postmaster.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(postmaster.pid)
    assert f"{postmaster.pid} /" in err
    assert "postgres -D" in err
