"""Where users reach agents (§19): DMs, the durable inbox; the console DM today."""
