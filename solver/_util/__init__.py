"""Leaves every package may import: one UUIDv7, one clock, one atomic write. Nothing here
imports the rest of the project."""
