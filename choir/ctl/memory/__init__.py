"""`choirctl memory` and `choirctl knowledge`: an agent's memory, for the operator."""
