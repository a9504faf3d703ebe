"""`choirctl secret`: manage secrets.json (§14). Values go in; they never come out.

`set`, `list` and `delete` edit the file; `secret apply` makes choird re-read it and tells the
running agents whose secrets changed to fetch them again.
"""

from __future__ import annotations

import getpass
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption, home_of
from choir.ctl.render.output import emit, table, warn

if TYPE_CHECKING:
    from choir.config import SecretStore
    from choir.home import ChoirHome
    from choir.protocol.operator.answers import SecretsApplied

app = typer.Typer(
    rich_markup_mode=None,
    help="Manage named secrets in $CHOIR_HOME/secrets.json. Values are never printed.",
    no_args_is_help=True,
)

NameArgument = Annotated[
    str, typer.Argument(help="Secret name, as config.json's `secret` fields reference it.")
]
ValueArgument = Annotated[
    str | None,
    typer.Argument(
        help="The value. Omit it to read from stdin (typed without echo on a terminal); "
        "an argument is visible in shell history and the process list.",
        show_default=False,
    ),
]


def _read_value(name: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(f"value of secret {name}: ")
    value = sys.stdin.read()
    return value.removesuffix("\n").removesuffix("\r") if value.endswith("\n") else value


def _store(home: ChoirHome) -> SecretStore:
    from choir.config import SecretStore

    return SecretStore.load(home.secrets_file)


def _require_home(home: ChoirHome) -> None:
    from choir.errors import NotFoundError

    if not home.root.is_dir():
        raise NotFoundError(f"{home.root} does not exist: run choirctl init")


def _outcome(home: ChoirHome, name: str, action: str) -> dict[str, Any]:
    from choir.config import read_secret_references

    refs = (read_secret_references(home) or {}).get(name, [])
    return {"name": name, "action": action, "file": str(home.secrets_file), "referenced_by": refs}


@app.command("set")
@documented("secret set")
def set_secret(
    name: NameArgument,
    value: ValueArgument = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.config import validate_secret_name
    from choir.errors import UsageError

    where = home_of(home)
    validate_secret_name(name)
    _require_home(where)
    store = _store(where)
    secret = value if value is not None else _read_value(name)
    if not secret:
        raise UsageError(f"empty value for secret {name!r}: pass a value or pipe it on stdin")
    action = "updated" if name in store else "added"
    store.with_secret(name, secret).save(where.secrets_file)
    data = _outcome(where, name, action)
    emit(data, as_json, lambda: _show_set(data))


def _show_set(data: dict[str, Any]) -> None:
    print(f"secret {data['name']!r} {data['action']} ({data['file']})")
    if not data["referenced_by"]:
        warn(f"no `secret` field in config.json references {data['name']!r} yet")


@app.command("list")
@documented("secret list")
def list_secrets(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.config import read_secret_references

    where = home_of(home)
    _require_home(where)
    store = _store(where)
    refs = read_secret_references(where)
    known = refs or {}
    rows: list[dict[str, Any]] = [
        {"name": name, "set": name in store, "referenced_by": known.get(name, [])}
        for name in sorted(set(store.names()) | set(known))
    ]
    missing = [row["name"] for row in rows if not row["set"]]
    data = {"file": str(where.secrets_file), "secrets": rows, "missing": missing}
    emit(data, as_json, lambda: _show_list(rows, missing, refs is None))


def _show_list(rows: list[dict[str, Any]], missing: list[str], no_config: bool) -> None:
    table(
        ("name", "set", "referenced by"),
        [(r["name"], "yes" if r["set"] else "NO", ", ".join(r["referenced_by"])) for r in rows],
    )
    if no_config:
        warn("config.json could not be read: references are not shown (see choirctl config check)")
    for name in missing:
        warn(f"secret {name!r} is referenced but not set (choirctl secret set {name})")


@app.command("delete")
@documented("secret delete")
def delete_secret(name: NameArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.errors import NotFoundError

    where = home_of(home)
    _require_home(where)
    store = _store(where)
    if name not in store:
        raise NotFoundError(
            f"no secret named {name!r} in {where.secrets_file} (see choirctl secret list)"
        )
    store.without(name).save(where.secrets_file)
    data = _outcome(where, name, "deleted")
    emit(data, as_json, lambda: _show_delete(data))


def _show_delete(data: dict[str, Any]) -> None:
    print(f"secret {data['name']!r} deleted from {data['file']}")
    if data["referenced_by"]:
        warn(f"still referenced by {', '.join(data['referenced_by'])}")


@app.command("apply")
@documented("secret apply")
def apply(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.secret_apply())
    emit(data, as_json, lambda: _show_apply(data))


def _show_apply(data: SecretsApplied) -> None:
    changed = ", ".join(data.changed or []) or "none"
    print(f"secrets reloaded in choird ({data.secrets} set); changed: {changed}")
    for push in data.pushed or []:
        names = ", ".join(push.secrets)
        print(f"  {push.agent_id} (session {push.session_id}) refreshes {names}")
