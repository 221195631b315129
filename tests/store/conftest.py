"""Fixtures for the run-store tests: a key pair and a small but complete run directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from solver.audit import AuditReport, Check, audit_run, store_checks
from solver.store import BlobRef, RunStore, generate_key_pair

MANIFEST = {
    "problem": {"path": "problems/p1.md", "sha256": "ab" * 32, "bytes": 120},
    "config": {"endpoint": "http://127.0.0.1:30000/v1", "api_key": "sk-never-logged"},
    "model": {"requested": "glm", "served": "glm-4.6"},
    "policies": {"network": {"allow": ["127.0.0.1:30000"]}},
}


@dataclass(frozen=True)
class Keys:
    private: Path
    public: Path
    key_id: str


@dataclass(frozen=True)
class BuiltRun:
    path: Path
    prompt: BlobRef
    request: BlobRef
    response: BlobRef
    proof: BlobRef


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    private, public, key_id = generate_key_pair(tmp_path_factory.mktemp("keys"))
    return Keys(private, public, key_id)


@pytest.fixture(scope="session")
def other_keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    private, public, key_id = generate_key_pair(tmp_path_factory.mktemp("other-keys"))
    return Keys(private, public, key_id)


def build_run(run_dir: Path, key: Path | None = None, *, seal_every: int = 4) -> BuiltRun:
    """A finished run: a prompt, a request and a streamed response blob, call records that
    name them, a final proof, run.finished and (with a key) seals and an attestation."""
    with RunStore.create(run_dir, MANIFEST, signing_key=key, seal_every=seal_every) as store:
        store.set_session(1)
        store.append("test.session", {"session": 1})
        prompt = store.put_blob(b"You are the generator. Prove: {{ problem }}")
        request = store.put_blob(b'{"messages":[{"role":"user","content":"Prove it."}]}')
        store.append("test.context", {"call_id": "c1", "messages": prompt.as_ref()})
        store.append("test.request", {"call_id": "c1", "request": request.as_ref()})
        with store.blob_writer() as writer:
            for index in range(40):
                writer.write(b'data: {"delta": "%d"}\n\n' % index)
            response = writer.commit()
        store.append("test.response", {"call_id": "c1", "response": response.as_ref()})
        proof = store.write_final("proof.md", "# Proof\n\nBy induction … ∎\n".encode())
        store.append(
            "run.finished",
            {"outcome": "solved", "final": {"proof.md": proof.as_ref()}, "summary": {}},
        )
        store.finish_attestation({"proof.md": proof})
    return BuiltRun(run_dir, prompt, request, response, proof)


def audit_store(run_dir: Path, public_key: Path | None = None) -> AuditReport:
    """The audit with the store's own checks only: these runs hold synthetic records, not
    the loop's, so the loop's semantic checks (solver/audit/calls.py) do not apply."""
    return audit_run(run_dir, public_key=public_key, checks=store_checks())


def failures(report: AuditReport) -> list[Check]:
    return [check for check in report.checks if check.status == "fail"]


def failure_text(report: AuditReport) -> str:
    return "\n".join(f"{c.name} | {c.where} | {c.detail}" for c in failures(report))


def journal_lines(run_dir: Path) -> list[bytes]:
    return (run_dir / "journal.jsonl").read_bytes().splitlines(keepends=True)


def write_lines(run_dir: Path, lines: list[bytes]) -> None:
    (run_dir / "journal.jsonl").write_bytes(b"".join(lines))
