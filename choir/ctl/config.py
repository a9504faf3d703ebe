"""`choirctl config`: check config offline; load, diff, apply and show it in choird (§17.6).

`config check` reads the files only. `load` stages them in choird (all or nothing), `diff` shows
staged vs running with how each change lands, `apply` publishes the hot-reloadable part to
running agents, `show` prints what choird runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption, home_of
from choir.ctl.render.output import emit, emit_json, warn

if TYPE_CHECKING:
    from choir.config import ChoirConfig
    from choir.protocol.operator.answers import ConfigApplied, ConfigChanges, ConfigLoaded

app = typer.Typer(
    rich_markup_mode=None,
    help="Validate the configuration in $CHOIR_HOME; load and apply it in choird.",
    no_args_is_help=True,
)


@app.command("check")
@documented("config check")
def check(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.config import check_home, config_hash, problems_header
    from choir.errors import ConfigError

    report, _ = check_home(home_of(home))
    config = report.config
    if config is None:
        if as_json:
            emit_json({"ok": False, "errors": report.errors, "warnings": report.warnings})
        _warn_all(report.warnings, as_json)
        raise ConfigError(report.errors, header=problems_header(report.errors))
    counts = summary(config)
    data = {
        "ok": True,
        "errors": [],
        "warnings": report.warnings,
        "counts": counts,
        "postgres": "embedded" if config.postgres.embedded else "external",
        "config_hash": config_hash(config),
    }
    emit(data, as_json, lambda: _show(counts, data))


SECTIONS = {
    "agents": ("agent", "agents"),
    "models": ("model", "models"),
    "workspaces": ("workspace", "workspaces"),
    "gateways": ("gateway", "gateways"),
    "dms": ("DM", "DMs"),
    "git_identities": ("git identity", "git identities"),
    "voice_profiles": ("voice profile", "voice profiles"),
}
"""The sections the one-line summary counts, with their singular and plural names."""


def summary(config: ChoirConfig) -> dict[str, int]:
    return {section: len(getattr(config, section)) for section in SECTIONS}


def _plural(count: int, section: str) -> str:
    singular, plural = SECTIONS[section]
    return f"{count} {singular if count == 1 else plural}"


def _warn_all(warnings: list[str], as_json: bool) -> None:
    if not as_json:
        for message in warnings:
            warn(message)


def _show(counts: dict[str, int], data: dict[str, Any]) -> None:
    _warn_all(data["warnings"], False)
    listing = ", ".join(_plural(count, noun) for noun, count in counts.items() if count)
    print(
        f"config ok: {listing}; postgres {data['postgres']}; "
        f"hash {data['config_hash'][:12]}"
        + (f"; {len(data['warnings'])} warning(s)" if data["warnings"] else "")
    )


@app.command("load")
@documented("config load")
def load(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.config_load())

    def show() -> None:
        _warn_all(data.warnings or [], False)
        print(f"config staged (hash {(data.config_hash or '')[:12]}): {_changes(data)}")
        _print_lines(data.lines or [])
        if data.lines:
            print("next: choirctl config apply")

    emit(data, as_json, show)


@app.command("diff")
@documented("config diff")
def diff(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.config_diff())

    def show() -> None:
        if not data.lines:
            print("no changes between the staged and the running config")
        _print_lines(data.lines)

    emit(data, as_json, show)


@app.command("apply")
@documented("config apply")
def apply(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.config_apply())

    def show() -> None:
        sessions = len(data.pushed)
        print(
            f"config v{data.config_version} applied ({_changes(data)}); "
            f"{sessions} running session(s) told to fetch it"
        )
        _print_lines(data.lines)
        _print_pending(data.pending)

    emit(data, as_json, show)


@app.command("show")
@documented("config show")
def show(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.config_show())

    def human() -> None:
        staged = "; a config is staged (choirctl config diff)" if data.staged else ""
        print(f"# config v{data.config_version}, hash {data.config_hash[:12]}{staged}")
        for line in _pending_lines(data.pending_lines, "; below as they run now"):
            print(f"# {line}")
        emit_json(data.config)

    emit(data, as_json, human)


def _pending_lines(lines: list[str], note: str = "") -> list[str]:
    """Applied changes that run only after a choird restart, under a heading saying so."""
    if not lines:
        return []
    return [f"pending until choird restarts ({len(lines)}{note}):", *lines]


def _print_pending(lines: list[str]) -> None:
    for line in _pending_lines(lines):
        print(line)


def _changes(data: ConfigChanges | ConfigApplied | ConfigLoaded) -> str:
    count = len(data.changes or [])
    return "no changes" if not count else f"{count} change{'s' if count != 1 else ''}"


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(f"  {line}")
