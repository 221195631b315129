"""One module per client protocol, each holding both directions (request in, events out)."""
