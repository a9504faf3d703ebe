"""`choird`: the host daemon's command line.

    choird [--home DIR] [--transport uds|http] [--listen HOST:PORT] [--tls-cert F --tls-key F]
           [--runtime auto|docker|process]

Start-up errors (bad config, Postgres unreachable, socket held by a live choird) print one line
and exit non-zero; SIGTERM and SIGINT shut down cleanly. `choird.restart` (`choir restart`)
stops serving, leaves the agents and the embedded Postgres running, and re-executes the same
command line in this process (`choir.daemon.reexec`): the new image adopts them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from choir.errors import ChoirError, ExitCode, one_line

if TYPE_CHECKING:
    from choir.daemon.app import ChoirDaemon
    from choir.daemon.prestart import EarlyStart
    from choir.home import ChoirHome
    from choir.transport import Handler

DESCRIPTION = "choir's host daemon: config, secrets, sessions, leases, Postgres, operator API."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="choird", description=DESCRIPTION)
    parser.add_argument("--home", help="choir state directory (default $CHOIR_HOME or ~/.choir.d)")
    parser.add_argument(
        "--transport",
        choices=("uds", "http"),
        default="uds",
        help="how agents reach choird: their own Unix sockets (default) or HTTP(S) on --listen",
    )
    parser.add_argument("--listen", default="127.0.0.1:9400", help="HOST:PORT of the HTTP listener")
    parser.add_argument("--tls-cert", type=Path, help="server certificate (PEM) for HTTPS")
    parser.add_argument("--tls-key", type=Path, help="private key (PEM) of --tls-cert")
    parser.add_argument(
        "--tls-self-signed",
        action="store_true",
        help="serve HTTPS with a self-signed certificate kept in $CHOIR_HOME/tls (single host)",
    )
    parser.add_argument(
        "--runtime",
        choices=("auto", "docker", "process"),
        help="where agents run: docker (sandboxed containers), process (host subprocesses, "
        "in a bwrap sandbox where it works, else unsandboxed) or auto (docker when an engine "
        "answers); default: config.json container.runtime, else auto",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )
    parser.add_argument(
        "--quiet", action="store_true", help="log to logs/choird.log only, not to stderr"
    )
    return parser


async def _serve(args: argparse.Namespace, early: EarlyStart) -> ChoirDaemon:
    """Run choird until it stops; the daemon, whose `restarting` says whether to exec again."""
    from choir.daemon.app import ChoirDaemon, DaemonOptions
    from choir.daemon.reexec import ReExec
    from choir.home import ChoirHome

    options = DaemonOptions(
        home=ChoirHome.resolve(args.home),
        transport=args.transport,
        listen=args.listen,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_self_signed=args.tls_self_signed,
        runtime=args.runtime,
    )
    daemon = ChoirDaemon(
        options, operator=_operator_handler, early=early, reexec=ReExec.of_this_process()
    )
    # Before "choird ready" is logged: a supervisor may signal as soon as it reads that line.
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, daemon.stop)
    async with daemon:
        # Ready: what the start-up allocated lives as long as choird (its garbage is a few
        # hundred objects): frozen, no collection scans it again (a full pass: ~60 ms of CPU).
        gc.freeze()
        gc.enable()
        await daemon.wait_stopped()
    return daemon


def _operator_handler(daemon: ChoirDaemon) -> Handler:
    """The operator API, imported once choird starts listening: its modules load while the
    embedded Postgres starts (`choir.daemon.app.AFTER_DATABASE`)."""
    from choir.daemon.operator.api import operator_handler

    return operator_handler(daemon)


def main(argv: list[str] | None = None) -> None:
    # The start-up allocates ~100k objects that live as long as choird (modules, models and
    # their validators): the collector's passes over them cost ~10 % of its CPU and free
    # nothing. It runs again once choird is ready (`_serve`).
    gc.disable()
    # pydantic's plugin lookup scans every installed distribution (30-45 ms) after importing
    # importlib.metadata (10-25 ms); choir uses no plugin
    from choir.pydantic_plugins import skip

    skip()
    args = _parser().parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        _fail("--tls-cert and --tls-key go together: pass both or neither", ExitCode.USAGE)
    from choir.home import ChoirHome
    from choir.logs import get_logger, setup_logging, shutdown_logging

    home = ChoirHome.resolve(args.home)
    if not home.config_file.is_file():
        _fail(f"no config at {home.config_file}: run `choirctl init` first", ExitCode.CONFIG)
    config = config_data(home)
    setup_logging(
        home,
        "choird",
        level=args.log_level,
        also_stderr=not args.quiet,
        archive_threshold_lines=archive_threshold(config),
    )
    get_logger("choird").info("open files allowed", fields={"limit": raise_fd_limit()})
    early = daemon = None
    # Until choird's loop handles it (`_serve`), SIGTERM unwinds like Ctrl-C: the server
    # started early is stopped on the way out, not left running without its choird.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        # Before the imports below: the embedded Postgres starts while they run.
        from choir.daemon.prestart import start_early

        early = start_early(home, config)
        # Held until the exec: the process runtime's agents are this process's children, and
        # asyncio kills a child whose subprocess transport is garbage-collected.
        daemon = asyncio.run(_serve(args, early))
    except ChoirError as err:
        message = one_line(err.message)
        get_logger("choird").error(f"choird failed to start: {message}")
        _fail(message, err.exit_code)
    except KeyboardInterrupt:
        pass
    finally:
        if early is not None:  # stopped already, unless choird failed before it took over
            early.close()  # (a restart keeps the server: `ChoirDaemon.begin_restart`)
        gc.enable()
        shutdown_logging()
    if daemon is not None and daemon.restarting and daemon.reexec is not None:
        daemon.reexec.run()


def config_data(home: ChoirHome) -> dict[str, Any]:
    """config.json as read before logging starts (which is before the config is checked):
    empty when the file is unusable — the check at start then says why."""
    from choir.config.jsonparse import parse_json_object

    try:
        return parse_json_object(home.config_file.read_text(), "config.json").data or {}
    except (OSError, UnicodeDecodeError):
        return {}


def archive_threshold(config: dict[str, Any]) -> int:
    """config.json's `log_archive_threshold_lines`; the default when the value is unusable."""
    from choir.logs import DEFAULT_ARCHIVE_THRESHOLD_LINES

    value = config.get("log_archive_threshold_lines")
    return value if type(value) is int and value > 0 else DEFAULT_ARCHIVE_THRESHOLD_LINES


def raise_fd_limit() -> int:
    """Lift the soft limit on open files to the hard one; the limit now in force.

    systemd and most shells start services with a soft limit of 1024, which a few hundred
    agent and operator connections, Postgres connections and container streams would reach;
    the hard limit is what the operator (or systemd's LimitNOFILE) actually allows.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        return soft
    return hard


def _fail(message: str, code: ExitCode) -> None:
    sys.stderr.write(f"choird: error: {message}\n")
    sys.exit(int(code))
