"""Creating homes and agents on disk: `choirctl init`, `agent init`, their git repos."""
