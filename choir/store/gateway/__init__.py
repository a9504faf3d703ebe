"""The Telegram gateway's durable state (§19.2): polling offsets and reply cursors."""
