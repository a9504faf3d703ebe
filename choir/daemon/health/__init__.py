"""choird's own health: its database and its disk, watched and reported as what they are."""
