"""Sampling is explicit: every role's temperature and top_p (and thinking budget) are in the
manifest and in every request body, and the audit re-produces those bodies byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from solver.config import ROLE_NAMES, RoleSettings
from solver.llm import Message, Request
from solver.llm import encode_request as encode
from solver.store import RunReader
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, solve


def test_the_defaults_are_the_public_glm5_evaluation_settings() -> None:
    role = RoleSettings()
    assert (role.temperature, role.top_p, role.thinking_budget) == (1.0, 0.95, None)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_every_protocol_sends_temperature_and_top_p(api: str) -> None:
    request = Request(
        model="m", messages=(Message.text("user", "x"),), max_tokens=8, temperature=1.0, top_p=0.95
    )
    body = orjson.loads(encode(api, request))  # type: ignore[arg-type]
    assert (body["temperature"], body["top_p"]) == (1.0, 0.95)


def _journal(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    return [r.data for r in RunReader(run_dir).records() if r.type == kind]


def test_a_default_run_records_and_sends_its_sampling(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path)
    manifest = json.loads((outcome.run_dir / "MANIFEST.json").read_text())
    for name in ROLE_NAMES:
        role = manifest["config"]["resolved"]["roles"][name]
        assert (role["temperature"], role["top_p"]) == (1.0, 0.95)
    assert fake.requests
    for request in fake.requests:
        assert (request.json["temperature"], request.json["top_p"]) == (1.0, 0.95)
        assert "custom_params" not in request.json
    (probed,) = _journal(outcome.run_dir, "endpoint.probed")
    (note,) = probed["notes"]  # 256000 is more than the 131072 served: said once
    # the checker, with no endpoint of its own, has no calls to cap
    assert all(f"{name} 256000" in note for name in ROLE_NAMES if name != "checker")
    assert "checker" not in note
    audit_ok(outcome.run_dir)


def test_a_probe_with_nothing_to_say_keeps_the_records_old_shape(tmp_path: Path) -> None:
    small = {f"roles.{name}.max_tokens": 64_000 for name in ROLE_NAMES}
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, **small)
    (probed,) = _journal(outcome.run_dir, "endpoint.probed")
    assert "notes" not in probed


def test_a_thinking_budget_goes_to_its_role_only_and_audits_clean(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved, thinking_budget=True) as fake:
        outcome = solve(fake, tmp_path, **{"roles.generator.thinking_budget": 16000})
    by_role: dict[str, list[Any]] = {}
    for request in fake.requests:
        by_role.setdefault(scripts.role_of(request), []).append(request.json.get("custom_params"))
    assert by_role["generator"]
    assert all(p == {"thinking_budget": 16000} for p in by_role["generator"])
    assert all(p is None for role, ps in by_role.items() if role != "generator" for p in ps)
    manifest = json.loads((outcome.run_dir / "MANIFEST.json").read_text())
    assert manifest["config"]["resolved"]["roles"]["generator"]["thinking_budget"] == 16000
    audit_ok(outcome.run_dir)  # the processor fields are re-produced from the record


def test_a_call_the_token_budget_caps_keeps_its_answer_room_under_its_thinking_budget(
    tmp_path: Path,
) -> None:
    """The loop caps a call's max_tokens to what the run's token budget leaves; its thinking
    budget is then fitted under that cap (the answer keeps 8192 tokens, or half the cap), as
    under a cap of the served context, and the run still audits clean."""
    # two generators share 58,000 tokens: each is capped near 28,000, where a budget of
    # 24,000 would leave its answer fewer than 8192 (the role, uncapped, leaves 232,000)
    settings = {
        "roles.generator.thinking_budget": 24_000,
        "roles.generator.max_tokens": 256_000,
        "budget.total_tokens": 58_000,
    }
    with ScriptedEndpoint(scripts.solved, thinking_budget=True) as fake:
        outcome = solve(fake, tmp_path, **settings)
    generators = [r.json for r in fake.requests if scripts.role_of(r) == "generator"]
    assert generators
    for body in generators:
        cap = body["max_tokens"]
        assert cap < 58_000  # capped by the token budget, not by the served context
        sent = body["custom_params"]["thinking_budget"]
        assert sent == min(24_000, max(cap - 8192, cap // 2))
    assert any(body["max_tokens"] - 24_000 < 8192 for body in generators)
    assert any(body["custom_params"]["thinking_budget"] < 24_000 for body in generators)
    audit_ok(outcome.run_dir)


def test_a_server_that_takes_no_budget_is_said_once_and_the_run_goes_on(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:  # its probe names no server
        outcome = solve(fake, tmp_path, **{"roles.generator.thinking_budget": 16000})
    assert outcome.outcome == "solved"
    assert all("custom_params" not in r.json for r in fake.requests)
    (probed,) = _journal(outcome.run_dir, "endpoint.probed")
    (note,) = [n for n in probed["notes"] if "thinking budget" in n]
    assert "generator 16000" in note and "not sent" in note
    audit_ok(outcome.run_dir)


def test_a_max_tokens_above_the_served_context_is_said_once(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:  # serves 131072 tokens of context
        outcome = solve(fake, tmp_path, **{"roles.verifier.max_tokens": 200_000})
    (probed,) = _journal(outcome.run_dir, "endpoint.probed")
    (note,) = probed["notes"]
    assert "verifier 200000" in note and "131072" in note
    started = _journal(outcome.run_dir, "llm.started")
    assert all(s["max_tokens_cap"] for s in started)  # each capped call says so


def test_anthropic_gets_temperature_alone_when_both_are_set() -> None:
    from solver.wire.sampling import one_sampling_knob

    request = Request(
        model="m", messages=(Message.text("user", "x"),), max_tokens=8, temperature=1.0, top_p=0.95
    )
    sent = one_sampling_knob("anthropic", request)
    body = orjson.loads(encode("anthropic", sent))
    assert body["temperature"] == 1.0 and "top_p" not in body
    assert one_sampling_knob("chat", request) is request
    only_top_p = Request(model="m", messages=request.messages, max_tokens=8, top_p=0.9)
    assert one_sampling_knob("anthropic", only_top_p) is only_top_p
