"""The wire's version number, apart from the models: choir-agent sends it in INIT_HELLO before
it loads pydantic (`choir.agent.startup.hello_payload`)."""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final = 1
"""Bumped on any incompatible change to the wire models; checked at INIT_HELLO."""
