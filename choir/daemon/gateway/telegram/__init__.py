"""The Telegram gateway (§19): choird's bots, polled and routed by `gateway`, started at step 8
(`start`). python-telegram-bot loads only when a bot is configured."""
