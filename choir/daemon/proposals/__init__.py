"""Approved proposals applied (issue 17): a skill is committed, merged, built and deployed.

`skill` checks a proposed skill and makes the file it becomes (pure); `steps` is the apply's
state machine (pure); `git_apply` writes the commit and merges it (git, no working tree);
`executor` runs the steps durably over Postgres, with the build and the update at its edges.
"""
