"""choird entry point."""

from __future__ import annotations

from choir.unfinished import not_yet


def main() -> None:
    not_yet("choird", "the host daemon")
