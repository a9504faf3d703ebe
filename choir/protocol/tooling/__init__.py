"""Tools, skills, locks, memory and bindings as the agent and choird both see them."""
