"""Suite-wide settings."""

from __future__ import annotations

import os

from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples, so a run there is reproducible
# and a red build always means a change broke something; local runs keep exploring new ones.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
