"""The six-role loop: state folded from the journal, a pure policy, an engine."""
