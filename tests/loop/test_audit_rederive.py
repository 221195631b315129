"""The audit re-derives what the loop derives, and judges a run by what it recorded.

Each case forges a run that is correctly chained and self-consistent (the request bytes are
re-encoded from the forged messages, so the chain, blob and prompt checks all pass) and
changes one thing only the re-derivation, policy, tool, network or template checks can see."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from solver import roles
from solver.audit import AuditContext, audit_run
from solver.audit.calls import check_isolation
from solver.llm import Message, encode_request, request_from_params
from solver.roles.templates import environment_from, render_template, template_source
from solver.store import Record, RunReader, RunStore
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.forge import failing, rewrite
from tests.loop.harness import EVAL_PROBLEM, solve

VERIFIER_USER = "verifier/user.j2"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("source")
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        return solve(fake, tmp, EVAL_PROBLEM, candidates=2).run_dir


@pytest.fixture(scope="module")
def selected_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three accepted candidates, so a selector call chooses among them."""
    tmp = tmp_path_factory.mktemp("selected")
    with FakeEndpoint(scripts.solved) as fake:
        return solve(fake, tmp, candidates=3, acceptance__accepted_needed=3).run_dir


def link(store: RunStore, data: bytes) -> dict[str, Any]:
    ref = store.put_blob(data)
    return {"blob": ref.digest, "bytes": ref.size}


class Reprompt:
    """Keeps a forged context consistent: new messages, and each request of that call
    re-encoded from them with its recorded parameters."""

    def __init__(self) -> None:
        self.messages: dict[str, tuple[Message, ...]] = {}

    def context(self, store: RunStore, data: dict[str, Any], rendered: list[list[str]]) -> None:
        data["messages"] = link(
            store,
            json.dumps(
                rendered, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode(),
        )
        self.messages[data["call_id"]] = tuple(Message.text(r, t) for r, t in rendered)  # type: ignore[arg-type]

    def started(self, store: RunStore, data: dict[str, Any]) -> None:
        messages = self.messages.get(data["call_id"])
        if messages is not None:
            body = encode_request(data["api"], request_from_params(messages, data["params"]))
            data["request"] = link(store, body)


def test_unchanged_copy_audits_clean(finished_run: Path, tmp_path: Path) -> None:
    report = audit_run(rewrite(finished_run, tmp_path / "copy", lambda s, t, d: d))
    assert report.ok, [c for c in report.checks if c.status != "pass"]
    isolation = next(c for c in report.checks if c.name == "isolation")
    assert "findings and proof lists rebuilt" in isolation.detail


def test_reviser_given_a_rejected_finding_and_a_report_marker_fails(
    finished_run: Path, tmp_path: Path
) -> None:
    extra = (
        f"\n\n### Finding C9 (severity: major)\nLocation: the final step\n"
        f"Explanation: a finding its reviewer rejected. {scripts.MARK_REPORT}"
    )
    forged: dict[str, str] = {}
    reprompt = Reprompt()

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "artifact.put" and data["kind"] == "confirmed_findings":
            text = store.read_blob(data["blob"]["blob"]).decode() + extra
            data["blob"] = link(store, text.encode())
            forged[data["artifact"]] = text
        elif type_ == "context.built" and data["role"] == "reviser":
            inputs = json.loads(store.read_blob(data["inputs"]["blob"]))
            (findings_link,) = data["links"]["confirmed_findings"]
            inputs["confirmed_findings"] = forged[findings_link["artifact"]]
            canonical = json.dumps(
                inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode()
            data["inputs"] = link(store, canonical)
            findings_link["blob"] = link(store, inputs["confirmed_findings"].encode())["blob"]
            model = roles.get_role("reviser").inputs_model.model_validate(inputs)
            rendered = [list(m) for m in roles.render("reviser", data["variant"], model)]
            reprompt.context(store, data, rendered)
        elif type_ == "llm.started":
            reprompt.started(store, data)
        return data

    run = rewrite(finished_run, tmp_path / "f", edit)
    assert forged, "the source run has no reviser call"
    report = audit_run(run)
    # Only the re-derivation can see it: the forged run is otherwise consistent.
    assert {c.name for c in report.checks if c.status == "fail"} == {"isolation"}
    found = failing(run, "isolation")
    assert any(
        "(confirmed_findings) is not what the recorded findings" in f and "seq" in f for f in found
    ), found


def test_selector_given_other_proofs_fails(selected_run: Path, tmp_path: Path) -> None:
    assert audit_run(rewrite(selected_run, tmp_path / "copy", lambda s, t, d: d)).ok
    forged = False

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        nonlocal forged
        if type_ == "artifact.put" and data["kind"] == "anonymised_proofs":
            forged = True
            proofs = json.loads(store.read_blob(data["blob"]["blob"]))
            data["blob"] = link(store, json.dumps(list(reversed([*proofs, "Proof."]))).encode())
        return data

    found = failing(rewrite(selected_run, tmp_path / "s", edit), "isolation")
    assert forged, "the source run has no selector call"
    assert any("(anonymised_proofs) is not what the recorded" in f for f in found), found


def test_tools_offered_and_a_lax_policy_fail(finished_run: Path, tmp_path: Path) -> None:
    tool = {"name": "search", "description": "web search", "parameters": {"type": "object"}}
    done = False

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        nonlocal done
        if type_ == "llm.started" and not done:
            done = True
            data["params"]["tools"] = [tool]
            body = json.loads(store.read_blob(data["request"]["blob"]))
            messages = tuple(
                Message.text(m["role"], m["content"])  # chat bodies: plain text messages
                for m in body["messages"]
            )
            request = request_from_params(messages, data["params"])
            data["request"] = link(store, encode_request(data["api"], request))
        return data

    def lax(manifest: dict[str, Any]) -> dict[str, Any]:
        manifest["roles"]["policy"]["verifier"].append("reference_solution")
        return manifest

    run = rewrite(finished_run, tmp_path / "t", edit, manifest=lax)
    found = failing(run, "isolation")
    assert any("was offered tools" in f and "seq" in f for f in found), found
    assert any("isolation policy is not this solver's" in f for f in found), found
    assert not failing(run, "prompts")  # the forged request is itself consistent


def test_connection_to_another_peer_fails_on_its_address(
    finished_run: Path, tmp_path: Path
) -> None:
    changed = False

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        nonlocal changed
        if type_ == "net.connect" and not changed:
            changed = True
            data["address"] = "198.51.100.7:" + data["address"].rsplit(":", 1)[1]
        return data

    found = failing(rewrite(finished_run, tmp_path / "n", edit), "network")
    assert len(found) == 1 and "198.51.100.7" in found[0] and "seq" in found[0], found


def _other_template_run(src: Path, dst: Path, *, store_template: bool) -> Path:
    """The run as if made by a solver whose verifier user template had one more line."""
    source = template_source(VERIFIER_USER) + b"\nCheck every step.\n"
    digest = "sha256:" + hashlib.sha256(source).hexdigest()
    env = environment_from(lambda name: source if name == VERIFIER_USER else template_source(name))
    reprompt = Reprompt()

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "context.built" and data["role"] == "verifier":
            data["templates"][VERIFIER_USER] = digest
            spec = roles.get_role("verifier")
            inputs = spec.inputs_model.model_validate_json(store.read_blob(data["inputs"]["blob"]))
            system, user = spec.templates[data["variant"]]
            context = {n: getattr(inputs, n) for n in type(inputs).model_fields}
            rendered = [
                ["system", render_template(system, context, env)],
                ["user", render_template(user, context, env)],
            ]
            reprompt.context(store, data, rendered)
        elif type_ == "llm.started":
            reprompt.started(store, data)
        return data

    def other(manifest: dict[str, Any]) -> dict[str, Any]:
        manifest["templates"][VERIFIER_USER] = digest
        return manifest

    extra = (source,) if store_template else ()
    return rewrite(src, dst, edit, manifest=other, extra_blobs=extra)


def test_prompts_render_from_the_templates_the_run_stored(
    finished_run: Path, tmp_path: Path
) -> None:
    run = _other_template_run(finished_run, tmp_path / "stored", store_template=True)
    report = audit_run(run)
    assert report.ok, [c for c in report.checks if c.status != "pass"]


def test_old_run_with_other_templates_fails_with_one_clear_line(
    finished_run: Path, tmp_path: Path
) -> None:
    run = _other_template_run(finished_run, tmp_path / "old", store_template=False)
    found = failing(run, "prompts")
    assert len(found) == 1 and found[0].startswith("run made with other templates"), found
    assert VERIFIER_USER in found[0]


class CountingRecords(list[Record]):
    """Records that count how often the whole journal is walked."""

    walks = 0

    def __iter__(self) -> Iterator[Record]:
        CountingRecords.walks += 1
        return super().__iter__()


def test_isolation_walks_the_journal_a_fixed_number_of_times(finished_run: Path) -> None:
    reader = RunReader(finished_run)
    scan = dataclasses.replace(reader.scan(), records=CountingRecords(reader.scan().records))
    ctx = AuditContext(reader, reader.manifest, None, scan, None)
    derived = sum(
        1 for r in scan.records if r.type == "artifact.put" and r.data["producer"] != "problem"
    )
    CountingRecords.walks = 0
    rows = check_isolation(ctx)
    assert [r.status for r in rows] == ["pass"]
    # Not once per proof or report: the run has many more of those than walks allowed.
    assert derived > 8 and CountingRecords.walks <= 4, (derived, CountingRecords.walks)
