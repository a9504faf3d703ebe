"""`bench.tools`'s code paths once, with small counts: real Chromium and the seed tool registry."""

from __future__ import annotations

from bench.tools import browser_figures, filtering_figures
from tests.harness.chromium import require_chromium


async def test_the_browser_figures_are_measured() -> None:
    require_chromium()
    figures = await browser_figures(opens=3, contexts=2)
    assert 0 < figures["browse_open_extract_p50_ms"] < 10_000
    assert 0 < figures["browser_context_create_ms"] < 10_000


def test_the_filtering_overhead_is_measured() -> None:
    figures = filtering_figures(200)
    assert figures["tool_list_filtering_overhead_us"] < 10_000
    assert figures["tool_list_filtering_cold_us"] < 100_000
