"""The one test harness: real choird, real agents, a scripted model, and waits on what they do.

- `fixtures`: `root` (a short /tmp directory), `model` (a `ScriptedModelServer` replaying the
  test's `script` fixture) and `home` on them, for every test (a plugin of tests/conftest.py).
- `homes`: `$CHOIR_HOME`s as `choirctl init` makes them (`initialized`: made once per process,
  copied), in short /tmp roots (Unix socket paths are limited to 107 bytes; pytest-xdist
  lengthens pytest's own tmp_path); `scripted_home` points the demo model at a scripted server.
- `daemons`: choird in the test process (`running_daemon`, the production composition root),
  the agent transports, and what choird stored.
- `processes`: real `choird`, `choirctl` and fake-agent processes.
- `cluster`: choird on a fresh home with N agents on the process runtime and a scripted model
  (`running_cluster`, `serving`), and the `Conversation` the fault invariants check.
- `chat`: send a chat message and wait for the answer(s) to it (`reply_to`, `answer_to`,
  `replies_through`, `replies_until`).
- `waits`: `poll_until` (async) and `wait_for` (blocking) for state that has no event to wait on.

Each test gets its own home, database, ports (port 0) and Docker labels, so tests run in parallel
on pytest-xdist workers (`./dev test`).
"""
