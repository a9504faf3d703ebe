"""`choirctl agent verify <agent-id>`: the running agent against the security profile (§15.3).

Registered on `choir.ctl.agent.commands.app`. Prints one line per profile item (pass/FAIL, what it
must be, what the container or sandbox has) and exits 1 when any item fails — an unsandboxed agent
on the process runtime always fails. `--json` prints choird's report as is.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit

if TYPE_CHECKING:
    from choir.protocol.operator.views import VerifyReport


@documented("agent verify")
def verify(
    agent_id: Annotated[str, typer.Argument(help="Agent id (running).", show_default=False)],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.agent_verify(agent_id))
    emit(data, as_json, lambda: print("\n".join(report_lines(data))))
    if not data.ok:
        sys.exit(1)


def report_lines(data: VerifyReport) -> list[str]:
    """The report for an operator: a headline, then one aligned line per item (an advisory
    item that fails is a `warn`: said, but not failing the report)."""
    where = f"container {data.container[:12]}" if data.container else data.runtime
    failed = [check.item for check in data.checks if not check.ok and check.required]
    warned = [check.item for check in data.checks if not check.ok and not check.required]
    verdict = "matches the security profile" if not failed else f"FAILS {', '.join(failed)}"
    if warned:
        verdict += f" (warning: {', '.join(warned)})"
    lines = [f"{data.agent_id} ({where}, checked {data.checked_at}): {verdict}"]
    width = max((len(check.item) for check in data.checks), default=0)
    for check in data.checks:
        mark = "pass" if check.ok else "FAIL" if check.required else "warn"
        detail = f"{check.actual}"
        if not check.ok:
            detail += f" (expected {check.expected})"
        lines.append(f"  {mark}  {check.item.ljust(width)}  {detail}")
    return lines


def verified_label(verified: VerifyReport | None, *, sandboxed: bool | None = None) -> str:
    """`agent status`'s line for the last check: `ok (at …)`, `FAILED …`, or `-`; a host
    process that was never checked says it is unsandboxed rather than leave a bare dash."""
    if not verified:
        return "none: a host process (unsandboxed)" if sandboxed is False else "-"
    failed = [c.item for c in verified.checks if not c.ok and c.required]
    warned = [c.item for c in verified.checks if not c.ok and not c.required]
    warning = f", warning: {', '.join(warned)}" if warned else ""
    if not failed:
        return f"matches the profile (checked {verified.checked_at}{warning})"
    return f"FAILED {', '.join(failed)} (checked {verified.checked_at}{warning})"
