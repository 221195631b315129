"""Click commands, one module per verb group."""
