"""The face of solver.testing: what other packages import from it.

The doubles that speak only the wire (the fake endpoint, the lab model, the virtual GPU) load
eagerly and take no HTTP library. ScriptedClient is a ModelClient (a drop-in subclass), so it
and the client's httpx load on first use (PEP 562).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from solver.testing.fake_endpoint import FakeEndpoint, RecordedRequest, Responder, echo_responder
from solver.testing.lab_model import LabModel, ProblemParams, ProofState, RoleParams
from solver.testing.roles import role_of
from solver.testing.virtual_gpu import GpuModel, VirtualGpu

if TYPE_CHECKING:
    from solver.testing.scripted_client import ScriptedClient


def __getattr__(name: str) -> object:
    if name == "ScriptedClient":
        value = globals()[name] = import_module("solver.testing.scripted_client").ScriptedClient
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FakeEndpoint",
    "GpuModel",
    "LabModel",
    "ProblemParams",
    "ProofState",
    "RecordedRequest",
    "Responder",
    "RoleParams",
    "ScriptedClient",
    "VirtualGpu",
    "echo_responder",
    "role_of",
]
