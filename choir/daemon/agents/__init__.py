"""The agent-facing control plane: the agent verbs, their authentication and what serves them."""
