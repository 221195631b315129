"""Suite-wide settings."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples, so a run there is reproducible
# and a red build always means a change broke something; local runs keep exploring new ones.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (``make test``) the tests on the real embedded
    model run on one worker, so they share one llama-server instead of each worker starting
    its own on the same two cores. A test marked with a group of its own (a whole solve that
    alone takes minutes) gets a worker and a server of its own."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        uses_model = "local_model_server" in getattr(item, "fixturenames", ())
        if uses_model and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group("local-model"))
