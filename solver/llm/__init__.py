"""Transport to model endpoints: canonical requests and stream events, one codec per protocol."""
