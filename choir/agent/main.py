"""choir-agent entry point."""

from __future__ import annotations

from choir.unfinished import not_yet


def main() -> None:
    not_yet("choir-agent", "the in-container agent runtime")
