"""Widgets shared by the console's views: the health header, confirmation, lane-state colours."""
