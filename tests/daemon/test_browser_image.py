"""Playwright drives choird's browser worker only: it must not enter choir-agent's image
(`choir.daemon.images.wheelhouse.HOST_ONLY`) — its wheel alone carries a Node.js driver."""

from __future__ import annotations

import importlib.metadata

from choir.daemon.images.wheelhouse import _pinned_requirements, agent_requirements


def test_playwright_is_a_dependency_of_choird_not_of_the_agent_image() -> None:
    assert any(r.startswith("playwright") for r in importlib.metadata.requires("choir") or [])
    _pinned_requirements.cache_clear()
    names = {pin.split("==")[0] for pin in agent_requirements()}
    assert not names & {"playwright", "greenlet", "pyee"}
