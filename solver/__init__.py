"""olympiad-solver: run a self-hosted model on olympiad problems and prove what happened."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("olympiad-solver")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
