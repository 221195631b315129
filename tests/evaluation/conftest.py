"""Fixtures for the evaluation tests: the report tests' runs of the real loop against the
scripted fake endpoint (127.0.0.1 only), shared rather than written twice."""

from __future__ import annotations

from tests.report.conftest import fake, finished_run

__all__ = ["fake", "finished_run"]
