"""choir: self-hosted LLM agent orchestration for one operator on one Linux host."""

import sys

__version__ = "0.1.0"

# `import httpx` also imports httpx's command-line tool (click, rich, pygments: ~70 ms of
# choir-agent's start) whenever those are installed, as they are beside choir. No choir process
# runs that tool; a None entry makes its import fail, and httpx then defines a stub in its place.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None blocks an import
