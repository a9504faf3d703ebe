"""The local Bot API server speaks what python-telegram-bot expects: a real `Bot` against it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter

from tests.harness.botapi import BOT_ID, BotApiServer, Limits

from .conftest import PHONE, TOKEN


@pytest.fixture
async def bot(api: BotApiServer) -> AsyncIterator[Bot]:
    async with Bot(TOKEN, base_url=f"{api.url}/bot") as bot:
        yield bot


async def test_a_bot_initialises_sends_edits_and_answers(bot: Bot, api: BotApiServer) -> None:
    assert (bot.id, bot.username) == (BOT_ID, "choir_test_bot")
    sent = await bot.send_message(PHONE, "first")
    await bot.edit_message_text("first, edited", chat_id=PHONE, message_id=sent.message_id)
    assert api.texts(PHONE) == ["first, edited"]
    assert await bot.send_chat_action(PHONE, "typing") is True
    assert api.actions == [(PHONE, "typing")]
    assert await bot.delete_webhook() is True
    assert (await bot.get_webhook_info()).url == ""


async def test_inline_buttons_are_pressed_answered_once_and_edited_away(
    bot: Bot, api: BotApiServer
) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="y-1")]])
    sent = await bot.send_message(PHONE, "sure?", reply_markup=keyboard)
    [card] = api.sent(PHONE)
    assert card.buttons == [("Yes", "y-1")]
    pressed = api.user_presses(PHONE, card, "y-1")
    [update] = await bot.get_updates(timeout=0)
    query = update.callback_query
    assert (query.id, query.data, query.from_user.id) == (pressed, "y-1", PHONE)
    assert query.message.message_id == sent.message_id
    assert await bot.answer_callback_query(query.id, text="done") is True
    assert [(a.callback_id, a.text) for a in api.answers] == [(pressed, "done")]
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query.id)  # once only, as on Telegram
    with pytest.raises(BadRequest, match="Button_data_invalid"):
        await bot.send_message(
            PHONE,
            "x",
            reply_markup=InlineKeyboardMarkup(
                [[InlineKeyboardButton("x", callback_data="d" * 65)]]
            ),
        )
    await bot.edit_message_reply_markup(PHONE, sent.message_id, reply_markup=None)
    assert api.sent(PHONE)[0].buttons == []
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_reply_markup(PHONE, sent.message_id, reply_markup=None)
    await bot.edit_message_reply_markup(PHONE, sent.message_id, reply_markup=keyboard)
    await bot.edit_message_text("sure.", chat_id=PHONE, message_id=sent.message_id)
    assert (api.sent(PHONE)[0].text, api.sent(PHONE)[0].buttons) == ("sure.", [])


async def test_long_polling_waits_for_an_update_and_the_offset_confirms(
    bot: Bot, api: BotApiServer
) -> None:
    polling = asyncio.ensure_future(bot.get_updates(timeout=5))
    await asyncio.sleep(0.2)
    assert not polling.done()
    update_id = api.user_says(PHONE, "/status")
    [update] = await asyncio.wait_for(polling, 5)
    assert (update.update_id, update.message.text) == (update_id, "/status")
    assert update.message.entities[0].type == "bot_command"
    assert await bot.get_updates(offset=update_id + 1, timeout=0) == ()
    assert api.pending_updates == []


async def test_telegrams_refusals(bot: Bot, api: BotApiServer) -> None:
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(PHONE, "x" * 4097)
    with pytest.raises(BadRequest, match="Can't parse entities"):
        await bot.send_message(PHONE, "2 * 3", parse_mode="Markdown")
    api.fail("sendMessage", 429, retry_after=3)
    with pytest.raises(RetryAfter):
        await bot.send_message(PHONE, "flood")
    api.fail("sendMessage", 502)
    with pytest.raises(NetworkError, match="Bad Gateway"):
        await bot.send_message(PHONE, "down")
    assert api.texts(PHONE) == []
    wrong = Bot("1:wrong", base_url=f"{api.url}/bot")
    try:
        with pytest.raises(InvalidToken):
            await wrong.initialize()
    finally:
        await wrong.request.shutdown()  # a bot whose initialize failed has no shutdown to run


async def test_slow_and_held_calls(bot: Bot, api: BotApiServer) -> None:
    api.slow("sendMessage", 0.5)
    started = time.monotonic()
    await bot.send_message(PHONE, "slow")
    assert time.monotonic() - started >= 0.5
    api.hold("sendMessage")
    sending = asyncio.ensure_future(bot.send_message(PHONE, "held"))
    await asyncio.sleep(0.3)
    assert not sending.done()
    api.release("sendMessage")
    await asyncio.wait_for(sending, 5)
    assert api.texts(PHONE) == ["slow", "held"]


async def test_a_429_can_hit_one_chat_and_a_chats_flood_is_counted(
    bot: Bot, api: BotApiServer
) -> None:
    api.fail("sendMessage", 429, retry_after=5, chat_id=PHONE)
    await bot.send_message(PHONE + 1, "another chat is not touched")
    with pytest.raises(RetryAfter):
        await bot.send_message(PHONE, "this chat is")
    for n in range(5):  # 6 in all within a second: the burst of 5, then one too many
        await bot.send_message(PHONE, f"burst {n}")
    assert api.violations == [(PHONE, "chat")]
    assert len(api.sends(PHONE)) == 6  # the refused one counts: Telegram saw it
    assert [c.params["text"] for c in api.sends(PHONE + 1)] == ["another chat is not touched"]


async def test_a_flood_across_chats_is_counted() -> None:
    async with (
        BotApiServer(TOKEN, limits=Limits(global_per_s=3)) as api,
        Bot(TOKEN, base_url=f"{api.url}/bot") as bot,
    ):
        for chat in range(4):  # well within a second: one over 3 a second
            await bot.send_message(1000 + chat, "wide")
        await bot.send_chat_action(2000, "typing")  # not a message: not counted
    assert api.violations == [(1003, "global")]
