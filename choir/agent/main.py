"""choir-agent entry point; as `git-cred-helper` (argv[0]) it is git's credential helper (§14.4)."""

from __future__ import annotations

import os
import sys

from choir.unfinished import not_yet


def main() -> None:
    if os.path.basename(sys.argv[0]) == "git-cred-helper":
        from choir.agent.credentials import helper_main

        sys.exit(helper_main(sys.argv))
    not_yet("choir-agent", "the in-container agent runtime")
