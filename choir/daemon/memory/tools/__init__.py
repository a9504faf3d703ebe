"""The memory host tools choird serves over EXECUTE_HOST_TOOL (§11.7), with the access rules."""
