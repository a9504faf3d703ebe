"""choir-agent's side of the control plane (§12.2, §13.1): verbs, heartbeats, config sync."""
