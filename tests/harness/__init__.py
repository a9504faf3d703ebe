"""The one test harness: real choird, real agents, a scripted model, and waits on what they do.

- `homes`: `$CHOIR_HOME`s as `choirctl init` makes them, in short /tmp roots (Unix socket paths
  are limited to 107 bytes; pytest-xdist lengthens pytest's own tmp_path).
- `daemons`: choird in the test process (`running_daemon`, the production composition root),
  the agent transports, and `poll_until` for state that has no event to wait on.
- `processes`: real `choird`, `choirctl` and fake-agent processes.
- `cluster`: choird on a fresh home with N agents on the process runtime and a scripted model
  (`running_cluster`, `serving`), and the `Conversation` the fault invariants check.
- `chat`: send a chat message and wait for the answer(s) to it.

Each test gets its own home, database, ports (port 0) and Docker labels, so tests run in parallel
on pytest-xdist workers (`./dev test`).
"""
