from __future__ import annotations

import pytest

from tests.local_server import LocalModel, local_model_server

__all__ = ["local_model", "local_model_server"]


@pytest.fixture(scope="session")
def local_model(local_model_server: LocalModel) -> LocalModel:
    """The session's real SmolLM2 llama-server (see tests/local_server.py)."""
    return local_model_server
