"""The security tests share the runtime tests' fixtures: a real choird on the docker runtime
(`choird`, with `engine` to look at its containers) on a home of the test session's Postgres."""

from tests.runtime.conftest import choird, engine, home, root

__all__ = ["choird", "engine", "home", "root"]
