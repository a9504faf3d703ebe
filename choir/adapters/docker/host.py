"""Where the Docker engine listens by default: apart from `docker_engine`, so that code which
only needs the address (the process runtime's sandbox hides the engine's socket) does not load
the Docker SDK."""

from __future__ import annotations

from typing import Final

DEFAULT_SOCKET: Final = "unix:///var/run/docker.sock"
"""Where the SDK looks when DOCKER_HOST is unset."""
