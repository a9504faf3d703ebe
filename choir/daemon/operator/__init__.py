"""The operator API (§17.1): one module per noun, the verbs choirctl and the console call."""
