"""The face of solver.testing: what other packages import from it."""

from __future__ import annotations

from solver.testing.fake_endpoint import FakeEndpoint, RecordedRequest, Responder, echo_responder
from solver.testing.lab_model import LabModel, ProblemParams, ProofState, RoleParams
from solver.testing.roles import role_of
from solver.testing.scripted_client import ScriptedClient
from solver.testing.virtual_gpu import GpuModel, VirtualGpu

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
