"""The HTTP(S) transport (§12.1): server, client, headers, status codes."""
