"""Test doubles shared by the test suites (the scripted fake model server)."""
