from __future__ import annotations

from tests.local_server import local_model_server

__all__ = ["local_model_server"]
