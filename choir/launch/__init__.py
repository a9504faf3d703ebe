"""`choir up`, `choir down`, `choir tui`: the umbrella command and what it drives."""
