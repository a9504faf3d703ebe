"""`choirctl chat <agent-id> [message]`: talk to an agent through the console DM.

With a message: send it, print what the agent says until it has answered that message (or
`--wait` runs out), and exit — an answer to another message (say, an earlier one a restart cut
short) is not this message's and is not printed. Without one: an interactive prompt; replies,
core job reports and errors print as they arrive. `/inject <instruction>` reaches edge at its
next safe point. A reply too large to travel whole arrives as a preview; the whole text is read
back from choird (`session.artifact`) before it is printed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.protocol.operator.answers import ChatReply

AgentArgument = Annotated[str, typer.Argument(help="The agent to talk to.", show_default=False)]
MessageArgument = Annotated[
    str | None,
    typer.Argument(help="Send this and wait for the answer; omit for an interactive prompt."),
]
WaitOption = Annotated[
    float, typer.Option("--wait", min=1, help="Seconds to wait for the answer to a message.")
]

_LABELS = {
    "reply": "",
    "core_report": "[core report] ",
    "core_question": "[core question] ",
    "core_update": "[core update] ",
    "error": "[error] ",
    "notice": "[notice] ",
    "command": "",
    "command_progress": "  ",
    "command_error": "[refused] ",
}


@documented("chat")
def chat(
    agent_id: AgentArgument,
    message: MessageArgument = None,
    wait: WaitOption = 120.0,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    async def talk(choird: ChoirClient) -> None:
        if message is None:
            await _interactive(choird, agent_id, as_json)
        else:
            await _one_shot(choird, agent_id, message, wait, as_json)

    with_choird(home, talk)


async def _one_shot(
    choird: ChoirClient, agent_id: str, message: str, wait: float, as_json: bool
) -> None:
    import asyncio

    from choir.errors import ChoirError, UnavailableError

    sent = await choird.chat_send(agent_id, message)
    if sent.injected:
        _show({"category": "notice", "text": "injected"}, as_json)
        return
    # choird keeps recent replies, so subscribing after the send misses nothing
    replies = choird.chat_replies(agent_id, after_seq=sent.after_seq)
    try:
        async with asyncio.timeout(wait):
            async for reply in replies:
                answers = reply.in_reply_to
                if answers is not None and answers != sent.message_id:
                    continue  # another message's answer, e.g. one a restart interrupted
                if answers is not None and reply.category == "command_error":
                    raise ChoirError(reply.text)  # a refused command fails the call
                _show(await _whole(choird, reply), as_json)
                if answers == sent.message_id and reply.category != "command_progress":
                    return  # the answer (a long command's steps come before it)
    except TimeoutError:
        raise UnavailableError(
            f"{agent_id} did not answer within {wait:g} s (see choirctl agent status {agent_id})"
        ) from None
    finally:
        await replies.aclose()


async def _interactive(choird: ChoirClient, agent_id: str, as_json: bool) -> None:
    import asyncio

    async def printer(after_seq: int) -> None:
        async for reply in choird.chat_replies(agent_id, after_seq=after_seq):
            _show(await _whole(choird, reply), as_json)

    shown: asyncio.Task[None] | None = None
    sys.stderr.write(
        f"chatting with {agent_id}; /inject <text> to steer, /help for commands, Ctrl-D to leave\n"
    )
    try:
        while True:
            line = await asyncio.to_thread(_prompt)
            if line is None:
                return
            if not line.strip():
                continue
            sent = await choird.chat_send(agent_id, line)
            if shown is None:  # follow from this first message on: choird keeps what came since
                shown = asyncio.create_task(printer(sent.after_seq))
    finally:
        if shown is not None:
            shown.cancel()


async def _whole(choird: ChoirClient, reply: ChatReply) -> dict[str, Any]:
    """`reply` as JSON, with its whole text when it arrived as a preview of a larger event."""
    shown = reply.model_dump(mode="json")
    if not reply.artifact or reply.rev is None:
        return shown
    event = await choird.session_event(reply.session_id, reply.rev)
    return {**shown, "text": str(event.get("text", reply.text))}


def _prompt() -> str | None:
    try:
        return input("you> ")
    except EOFError:
        return None


def _show(reply: dict[str, Any], as_json: bool) -> None:
    from choir.ctl.render.output import json_text, write_visible

    if as_json:
        sys.stdout.write(json_text(reply) + "\n")
    else:  # the agent's words: shown, never interpreted by the terminal
        label = _LABELS.get(str(reply.get("category")), "")
        write_visible(f"{label}{reply.get('text', '')}\n")
        for path in reply.get("attachments") or []:
            write_visible(f"  attachment: {path}\n")
    sys.stdout.flush()
