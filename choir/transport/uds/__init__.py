"""The Unix-socket transport: server, client, socket files."""
