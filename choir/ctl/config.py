"""`choirctl config`: offline checks of config.json and secrets.json.

`config load|diff|apply|show` talk to choird and arrive with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from choir.ctl.options import HomeOption, JsonOption, home_of
from choir.ctl.output import emit, emit_json, warn

if TYPE_CHECKING:
    from choir.config import ChoirConfig

app = typer.Typer(
    help="Validate the configuration in $CHOIR_HOME.",
    no_args_is_help=True,
)


@app.command("check")
def check(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Validate config.json and secrets.json offline, reporting every problem at once.

    Exits 3 when there are errors; warnings (placeholders, unset secrets) do not fail.
    """
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
