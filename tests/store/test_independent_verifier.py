"""docs/format.md is complete enough to verify a run without our code: this verifier uses
only the standard library, `cryptography` and `jinja2`, and follows the document step by step
(its isolation rules, every derived input included, are in ``page_rules``). Project code is
used only to make the runs it checks and to run ``solver audit`` beside it."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.testing import ProblemParams

from . import page_rules
from .conftest import BuiltRun, Keys, audit_store, build_run


def h(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def dsse_payload(envelope_bytes: bytes, public_pem: bytes) -> dict[str, object]:
    envelope = json.loads(envelope_bytes)
    payload = base64.b64decode(envelope["payload"])
    kind = envelope["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)
    key = load_pem_public_key(public_pem)
    key.verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae)  # type: ignore[union-attr]
    decoded: dict[str, object] = json.loads(payload)
    return decoded


def verify(run: Path, public_pem: bytes) -> list[str]:
    """Every problem found, following "Verifying a run" in docs/format.md."""
    problems: list[str] = []
    genesis = h((run / "MANIFEST.json").read_bytes())
    lines = (run / "journal.jsonl").read_bytes().split(b"\n")
    if lines[-1] != b"":
        problems.append("torn tail")
    records = []
    for n, line in enumerate(lines[:-1]):
        record = json.loads(line)
        expected_prev = genesis if n == 0 else h(lines[n - 1])
        if record["seq"] != n or record["prev"] != expected_prev:
            problems.append(f"chain breaks at line {n}")
        records.append(record)
    if records[0]["type"] != "run.created" or records[0]["data"]["manifest"] != genesis:
        problems.append("manifest not bound")
    for blob in (run / "blobs" / "sha256").glob("*/*"):
        if h(blob.read_bytes()) != "sha256:" + blob.name or blob.parent.name != blob.name[:2]:
            problems.append(f"bad blob {blob.name}")
    previous_seal = None
    for seal in sorted((run / "seals").glob("seal-*.json")):
        payload = dsse_payload(seal.read_bytes(), public_pem)
        count = payload["count"]
        assert isinstance(count, int)
        if count > len(records) or h(lines[count - 1]) != payload["chain_head"]:
            problems.append(f"seal {seal.name} does not match")
        if payload["prev_seal"] != previous_seal:  # format 2: seals are chained
            problems.append(f"seal {seal.name} does not follow the seal before it")
        previous_seal = h(seal.read_bytes())
    statement = dsse_payload((run / "attestation.intoto.jsonl").read_bytes(), public_pem)
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}  # type: ignore[attr-defined]
    (journal_name,) = [name for name in subjects if name.startswith("journal.jsonl@")]
    count = int(journal_name.split("@")[1])
    if count > len(records) or h(lines[count - 1]) != "sha256:" + subjects.pop(journal_name):
        problems.append("attestation head does not match")
    finished = [r for r in records if r["type"] == "run.finished"][-1]
    for name, link in finished["data"]["final"].items():
        if "sha256:" + subjects.get(name, "") != link["blob"]:
            problems.append(f"attestation subject {name} differs")
        if h((run / "final" / name).read_bytes()) != link["blob"]:
            problems.append(f"final/{name} differs")
    return problems


@pytest.fixture
def signed(tmp_path: Path, keys: Keys) -> BuiltRun:
    return build_run(tmp_path / "run", keys.private)


def test_independent_verifier_accepts_what_solver_audit_accepts(
    signed: BuiltRun, keys: Keys
) -> None:
    assert verify(signed.path, keys.public.read_bytes()) == []
    assert audit_store(signed.path, keys.public).ok


def test_independent_verifier_and_audit_agree_on_a_tampered_run(
    signed: BuiltRun, keys: Keys
) -> None:
    lines = (signed.path / "journal.jsonl").read_bytes().split(b"\n")
    lines[5] = lines[5].replace(b'"c1"', b'"c9"')  # the line the seal at count 6 signed
    (signed.path / "journal.jsonl").write_bytes(b"\n".join(lines))
    problems = verify(signed.path, keys.public.read_bytes())
    assert problems == ["chain breaks at line 6", "seal seal-00000006.json does not match"]
    assert not audit_store(signed.path, keys.public).ok


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=st.floats(min_value=0.0, max_value=1.0, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_in_a_signed_journal_fails_the_audit(
    tmp_path_factory: pytest.TempPathFactory, keys: Keys, where: float, bit: int
) -> None:
    run = build_run(tmp_path_factory.mktemp("flip") / "run", keys.private)
    path = run.path / "journal.jsonl"
    data = bytearray(path.read_bytes())
    data[int(where * len(data))] ^= 1 << bit
    path.write_bytes(bytes(data))
    report = audit_store(run.path, keys.public)
    assert not report.ok, f"a flip at byte {int(where * len(data))} went unnoticed"


# ---------------------------------------------------------------------------------------------
# The loop checks, from "Re-rendering prompts" and "Request bodies" in docs/format.md alone:
# jinja2 with the settings the page gives, the page's label filter, its rule for which template
# is the system message, its blob formats and its per-API body rules. No project code is used.


def page_label(index: int) -> str:
    """The page's proof label: 0 -> A, 25 -> Z, 26 -> AA (bijective base 26)."""
    label, number = "", index + 1
    while number:
        number, rest = divmod(number - 1, 26)
        label = chr(65 + rest) + label
    return label


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def read_blob(run: Path, digest: str) -> bytes:
    hex_ = digest.removeprefix("sha256:")
    data = (run / "blobs" / "sha256" / hex_[:2] / hex_).read_bytes()
    assert h(data) == digest
    return data


def render_from_page(run: Path, built: dict[str, object]) -> bytes:
    import jinja2

    manifest = json.loads((run / "MANIFEST.json").read_bytes())
    used = built["templates"]
    assert isinstance(used, dict)
    sources = {name: read_blob(run, manifest["templates"][name]).decode() for name in used}
    env = jinja2.Environment(
        loader=jinja2.DictLoader(sources),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["proof_label"] = page_label
    mains = [name for name in used if not name.rsplit("/", 1)[-1].startswith("_")]
    later = sorted(
        (int(m.group(1)), m.group(2), name)
        for name in mains
        if (m := re.search(r"\.(\d+)\.(assistant|user)\.j2$", name))
    )
    first = [name for name in mains if not re.search(r"\.\d+\.(assistant|user)\.j2$", name)]
    (system,) = [name for name in first if name.endswith("system.j2")]
    (user,) = [name for name in first if name.endswith("user.j2")]
    turns = [("system", system), ("user", user), *((role, name) for _, role, name in later)]
    inputs_link = built["inputs"]
    assert isinstance(inputs_link, dict)
    context = json.loads(read_blob(run, inputs_link["blob"]))
    messages = [
        [role, env.get_template(name).render(context).strip("\n") + "\n"] for role, name in turns
    ]
    return canonical(messages)


def page_float(value: float) -> str:
    """The page's float form: shortest round-trip digits, plain decimal for 1e-5 <= |x| < 1e16,
    else ``<digits>e<sign><exponent>`` without padding."""
    digits = repr(value)  # Python's shortest round-trip digits
    if value == 0 or 1e-5 <= abs(value) < 1e16:
        return digits if "e" not in digits else format(Decimal(digits), "f")
    mantissa, _, exponent = digits.partition("e")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:])}"


def page_body_json(value: object) -> str:
    """The page's body encoding: canonical JSON except for the float form it gives."""
    if isinstance(value, float):
        return page_float(value)
    if isinstance(value, dict):
        items = sorted(value.items())
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{page_body_json(v)}" for k, v in items)
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(page_body_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def body_from_page(api: str, messages: list[list[str]], params: dict[str, object]) -> bytes:
    body: dict[str, object] = {"model": params["model"], "stream": params["stream"]}
    optional = {"temperature": params["temperature"], "top_p": params["top_p"]}
    reasoning = params["reasoning"]
    if api == "chat":
        body["messages"] = [{"role": role, "content": text} for role, text in messages]
        body["max_tokens"] = params["max_tokens"]
        if params["stream"]:
            body["stream_options"] = {"include_usage": True}
        optional.update(stop=params["stop"] or None, seed=params["seed"])
        if reasoning is not None:
            body["chat_template_kwargs"] = {"enable_thinking": reasoning}
    elif api == "responses":
        body["input"] = [
            {
                "type": "message",
                "role": role,
                "content": [
                    {"type": "output_text" if role == "assistant" else "input_text", "text": text}
                ],
            }
            for role, text in messages
        ]
        body["max_output_tokens"] = params["max_tokens"]
        body["store"] = False
        if reasoning is not None:
            body["reasoning"] = {"effort": "high" if reasoning else "minimal"}
    else:
        assert api == "anthropic"
        system = "\n\n".join(text for role, text in messages if role == "system")
        turns: list[dict[str, object]] = []
        for role, text in messages:
            if role == "system":
                continue
            blocks = [{"type": "text", "text": text}] if text else []
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"] += blocks  # type: ignore[operator]
            else:
                turns.append({"role": role, "content": blocks})
        body["messages"] = turns
        body["max_tokens"] = params["max_tokens"]
        if system:
            body["system"] = system
        optional["stop_sequences"] = params["stop"] or None
        if reasoning is True:
            budget = max(1024, int(params["max_tokens"]) * 3 // 4)  # type: ignore[call-overload]
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif reasoning is False:
            body["thinking"] = {"type": "disabled"}
    body.update({key: value for key, value in optional.items() if value is not None})
    assert not params["tools"] and params["tool_choice"] is None  # the loop offers no tools
    for key, value in params["extra"]:  # type: ignore[attr-defined]
        body[key] = value
    return page_body_json(body).encode()


def page_loop_problems(run: Path) -> tuple[int, int, list[str]]:
    """(contexts checked, bodies checked, problems) for every context.built and llm.started."""
    records = [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]
    contexts: dict[str, dict[str, object]] = {}
    problems: list[str] = []
    bodies = 0
    for record in records:
        data = record["data"]
        if record["type"] == "context.built":
            contexts[data["call_id"]] = data
            if render_from_page(run, data) != read_blob(run, data["messages"]["blob"]):
                problems.append(f"prompt of {data['call_id']}")
        elif record["type"] == "llm.started":
            built = contexts[data["call_id"]]
            link = built["messages"]
            assert isinstance(link, dict)
            messages = json.loads(read_blob(run, link["blob"]))
            body = body_from_page(data["api"], messages, data["params"])
            bodies += 1
            if body != read_blob(run, data["request"]["blob"]):
                problems.append(f"request of {data['call_id']} attempt {data['attempt']}")
    return len(contexts), bodies, problems


def audit_row(run: Path, name: str) -> tuple[str, list[str]]:
    """The status of ``solver audit``'s rows named ``name``, and where the failing ones are."""
    from solver.audit import audit_run

    rows = [c for c in audit_run(run).checks if c.name == name]
    status = "fail" if any(c.status == "fail" for c in rows) else rows[0].status
    return status, [str(c.where) for c in rows if c.status == "fail"]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_prompts_bodies_and_isolation_re_made_from_the_page(tmp_path: Path, api: str) -> None:
    from solver.testing import FakeEndpoint
    from tests.loop import scripts
    from tests.loop.harness import solve

    # No proof is ever accepted: every role of the solve phase gets its turn, the selector too.
    with FakeEndpoint(scripts.never_accepted) as fake:
        run = solve(fake, tmp_path, api=api, candidates=2).run_dir
    contexts, bodies, problems = page_loop_problems(run)
    assert problems == []
    assert contexts >= 5 and bodies >= contexts
    roles_seen = {
        json.loads(line)["data"]["role"]
        for line in (run / "journal.jsonl").read_bytes().splitlines()
        if b'"type":"context.built"' in line
    }
    assert {"generator", "verifier", "reviewer", "reviser", "selector", "grader"} <= roles_seen
    # The isolation verdict, with every derived input re-made from the page's rules.
    verdicts = page_rules.isolation(run)
    assert verdicts.problems == []
    assert audit_row(run, "isolation") == ("pass", [])
    assert verdicts.contexts == contexts
    assert verdicts.from_responses["proof_text"] >= 2
    assert verdicts.from_responses["verification_report"] >= 2
    assert verdicts.derived["confirmed_findings"] >= 1
    assert verdicts.derived["anonymised_proofs"] == 1


def test_evaluation_inputs_re_made_from_the_page(tmp_path: Path) -> None:
    """Evaluation mode: a drafted marking scheme and graders' judgments, re-made too."""
    from solver.testing import FakeEndpoint
    from tests.loop import scripts
    from tests.loop.harness import solve

    problem = (
        '---\nid: odd-squares-ref\nreference_solution: "Work modulo 4."\n---\n'
        "Prove that the sum of the squares of two odd integers is never a perfect square.\n"
    )
    with FakeEndpoint(scripts.solved) as fake:
        run = solve(fake, tmp_path, problem, candidates=1).run_dir
    verdicts = page_rules.isolation(run)
    assert verdicts.problems == []
    assert audit_row(run, "isolation") == ("pass", [])
    assert verdicts.from_responses["marking_scheme"] == 1
    assert verdicts.from_responses["grader_judgments"] >= 1


def rechain(run: Path, records: list[dict[str, object]]) -> None:
    """Write ``records`` back as the page says a journal is made (canonical lines, each
    ``prev`` the hash of the line before)."""
    prev = h((run / "MANIFEST.json").read_bytes())
    lines = []
    for record in records:
        record["prev"] = prev
        line = canonical(record)
        lines.append(line)
        prev = h(line)
    (run / "journal.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


def test_the_page_and_the_audit_flag_the_same_forged_report(tmp_path: Path) -> None:
    from solver.testing import FakeEndpoint
    from tests.loop import scripts
    from tests.loop.harness import solve

    with FakeEndpoint(scripts.fix_after_finding) as fake:
        run = solve(fake, tmp_path, candidates=1).run_dir
    records = [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]
    planned = {r["data"]["call_id"]: r["data"] for r in records if r["type"] == "call.planned"}
    completions = [
        r
        for r in records
        if r["type"] == "llm.completed" and planned[r["data"]["call_id"]]["role"] == "verifier"
    ]
    # A verification of the flawed first version answered as one of the good second version
    # did: its recorded report (with the finding) is no longer what its response says.
    versions = sorted({planned[r["data"]["call_id"]]["version"] for r in completions})
    assert len(versions) == 2
    flawed, good = (
        next(r for r in completions if planned[r["data"]["call_id"]]["version"] == v)
        for v in versions
    )
    flawed["data"]["response"] = good["data"]["response"]
    rechain(run, records)
    report = next(
        r["seq"]
        for r in records
        if r["type"] == "artifact.put" and r["data"]["producer"] == flawed["data"]["call_id"]
    )
    assert page_rules.isolation(run).problems == [
        f"seq {report}: {flawed['data']['call_id']}.report is not derived from its response"
    ]
    assert audit_row(run, "isolation") == ("fail", [f"journal.jsonl seq {report}"])


def test_the_page_s_renderer_notices_a_prompt_made_from_other_inputs(tmp_path: Path) -> None:
    from solver.testing import FakeEndpoint
    from tests.loop import scripts
    from tests.loop.harness import solve

    with FakeEndpoint(scripts.fix_after_finding) as fake:
        run = solve(fake, tmp_path, candidates=1).run_dir
    records = [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]
    verifiers = [
        r["data"]
        for r in records
        if r["type"] == "context.built" and r["data"]["role"] == "verifier"
    ]
    first, other = verifiers[0], verifiers[-1]
    assert first["inputs"] != other["inputs"]
    recorded = read_blob(run, first["messages"]["blob"])
    assert render_from_page(run, first) == recorded
    assert render_from_page(run, {**first, "inputs": other["inputs"]}) != recorded


@pytest.mark.parametrize("temperature", [0.7, 1.0, 0.00001, 2.5e-7, 1e-6, 0.000012, 1e16, 1.5e300])
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_page_s_float_form_is_the_encoder_s(api: str, temperature: float) -> None:
    # The one place the page is checked against the project's code: its body encoder.
    from solver.llm import Message, encode_request, request_from_params

    params: dict[str, object] = {
        "model": "m",
        "max_tokens": 100,
        "temperature": temperature,
        "top_p": None,
        "stop": [],
        "seed": None,
        "reasoning": None,
        "tools": [],
        "tool_choice": None,
        "stream": True,
        "extra": [["x_extra", {"b": temperature, "a": "é"}]],
    }
    messages = [["system", "S"], ["user", "U ∎"]]
    request = request_from_params(tuple(Message.text(r, t) for r, t in messages), params)  # type: ignore[arg-type]
    assert body_from_page(api, messages, params) == encode_request(api, request)  # type: ignore[arg-type]


def _forge_and_compare(run: Path, forge: object, kind: str) -> None:
    """Apply ``forge`` to the records, re-chain, and check that the page's verifier and the
    audit both fail exactly the ``artifact.put`` records of ``kind``."""
    records = [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]
    forge(records)  # type: ignore[operator]
    rechain(run, records)
    seqs = [r["seq"] for r in records if r["type"] == "artifact.put" and r["data"]["kind"] == kind]
    assert seqs
    problems = page_rules.isolation(run).problems
    assert [p.split(":")[0] for p in problems] == [f"seq {s}" for s in seqs]
    assert all("is not what the journal derives" in p for p in problems)
    assert audit_row(run, "isolation") == ("fail", [f"journal.jsonl seq {s}" for s in seqs])


def test_the_page_and_the_audit_flag_the_same_forged_reviews(tmp_path: Path) -> None:
    from solver.testing import FakeEndpoint
    from tests.loop import scripts
    from tests.loop.harness import solve

    with FakeEndpoint(scripts.fix_after_finding) as fake:
        run = solve(fake, tmp_path, candidates=1).run_dir

    def no_confirmations(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["type"] == "call.completed" and r["data"]["role"] == "reviewer":
                r["data"]["facts"] = {"confirmed": [], "rejected": [], "severity": {}}

    _forge_and_compare(run, no_confirmations, "confirmed_findings")


def test_the_page_and_the_audit_flag_the_same_forged_grade(tmp_path: Path) -> None:
    from solver.testing import FakeEndpoint
    from tests.loop import scripts
    from tests.loop.harness import solve

    with FakeEndpoint(scripts.never_accepted) as fake:
        run = solve(fake, tmp_path, candidates=2).run_dir

    def one_grade_lower(records: list[dict[str, Any]]) -> None:
        grade = next(
            r
            for r in records
            if r["type"] == "call.completed" and r["data"]["call_id"].startswith("grade.")
        )
        grade["data"]["facts"] = {"score": 1}

    _forge_and_compare(run, one_grade_lower, "anonymised_proofs")


# ---------------------------------------------------------------------------------------------
# The loop's later call kinds (docs/format.md, "Pooled proofs" and "Final checks and pairwise
# selection"): self-improvement turns, restarts from the pool, recombinations, final and
# recheck rounds, several grades and pairwise selection, on runs of the policy lab's simulated
# model (solver.testing.LabModel through ScriptedClient: the journal a run over HTTP holds).

EVERY_FEATURE = {
    "acceptance.self_improve": True,
    "acceptance.restart_from_pool": True,
    "acceptance.recombine": 2,
    "acceptance.final_verifications": 2,
    "acceptance.recheck_answers": True,
    "acceptance.final_grades": 3,
}
LAB_TAG = re.compile(r"LAB-PROOF ([0-9a-f]{12})")


def lab_run(
    root: Path,
    api: str,
    params: ProblemParams,
    seed: int,
    budget: int,
    candidates: int,
    *,
    pairwise: bool = True,
) -> Path:
    """One lab session with every feature on; its run directory."""
    import sys
    from dataclasses import replace

    from solver.config import resolve_settings
    from solver.testing import (
        GpuModel,
        LabModel,
        RecordedRequest,
        RoleParams,
        ScriptedClient,
        VirtualGpu,
    )
    from solver.testing.fake_endpoint import Reply

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import policy  # type: ignore[import-not-found]  # bench/policy.py: its lab runner

    # no stated answers, so that answers_differ below gives each proof its own
    lab = LabModel(params, replace(RoleParams(), answer_problems=0.0), seed)
    gpu = VirtualGpu(model=GpuModel())

    def answers_differ(request: RecordedRequest) -> Reply:
        # The lab's proofs all answer alike; give each proof an answer of its own (1 or 2) so
        # that accepted proofs can disagree and the recheck round occurs.
        reply = lab(request)
        tag = LAB_TAG.search(reply.text)
        if tag is None or "See the proof." not in reply.text:
            return reply
        answer = str(int(tag.group(1), 16) % 2 + 1)
        return replace(reply, text=reply.text.replace("See the proof.", answer))

    root.mkdir(parents=True, exist_ok=True)
    path = policy.problem_file(root, params)
    flags: dict[str, Any] = {
        "endpoint": "http://127.0.0.1:9/v1",
        "api": api,
        "runs_dir": root / "runs",
        "budget.total_tokens": budget,
        "retry.max_attempts": 1,
        "candidates": candidates,
        "acceptance.pairwise_selection": pairwise,
        **EVERY_FEATURE,
    }
    resolved = resolve_settings(flags=flags, env={}, cwd=root)

    def client(endpoint: Any, deadlines: Any, retry: Any, on_connect: Any) -> ScriptedClient:
        return ScriptedClient(endpoint, answers_differ, on_connect=on_connect, pace=gpu)

    run_dir: Path = policy.solve_in_lab(path, resolved, client, gpu, ["lab", api, str(seed)])
    return run_dir


def call_kinds(run: Path) -> dict[str, int]:
    """How many calls of each later kind the run planned, and its later decisions."""
    kinds: dict[str, int] = {}

    def count(kind: str) -> None:
        kinds[kind] = kinds.get(kind, 0) + 1

    for line in (run / "journal.jsonl").read_bytes().splitlines():
        record = json.loads(line)
        data = record["data"]
        if record["type"] == "decision" and data["kind"] in (
            "final_passed",
            "recheck_passed",
            "unaccepted",
        ):
            count(data["kind"])
        if record["type"] != "call.planned":
            continue
        call_id, role, target = data["call_id"], data["role"], data["target"]
        if role == "generator:improve":
            count("improve")
        elif role == "reviser:recombine":
            count("recombine")
        elif role == "reviser" and re.fullmatch(r"L\d+\.v\d+", target or ""):
            count("restart")
        elif role == "verifier" and ".final." in call_id:
            count("final")
        elif role == "verifier" and ".recheck." in call_id:
            count("recheck")
        elif re.fullmatch(r"grade\.L\d+\.v\d+\.\d+", call_id):
            count("grade.n")
        elif role == "selector" and data["variant"] == "pairwise":
            count("pairwise")
        elif role == "selector":
            count("selector")
    return kinds


ACCEPTING = {"improve", "restart", "recombine", "final", "recheck", "pairwise"}
UNACCEPTED = {"improve", "grade.n", "pairwise"}
# Every flaw found and none fixed: nothing is accepted, so each final version gets its grades.
HOPELESS = ProblemParams(
    "X", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.0, fix=0.0, p_wrong=0.0
)


def lab_problem(name: str) -> ProblemParams:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import policy  # bench/policy.py: the lab's problems

    found: ProblemParams = next(p for p in policy.PROBLEMS if p.name == name)
    return found


# A lab session is a pure function of its seed, and the request bodies (so the draws) differ by
# API. These seeds show the later call kinds on each API in one or two sessions (found by running
# the full lists); the full lists follow, so a change to the lab costs time, never coverage.
ACCEPTING_FIRST = {"chat": [3], "responses": [1], "anthropic": [0, 3]}
HOPELESS_FIRST = {"chat": [1], "responses": [1], "anthropic": [3]}


def accepting_tries(api: str) -> list[tuple[ProblemParams, int, int]]:
    """Sessions likely to accept proofs: P4's first, then P3's."""
    first = [(lab_problem("P4"), seed, 3_000_000) for seed in ACCEPTING_FIRST[api]]
    rest = [(lab_problem(p), seed, 3_000_000) for p in ("P4", "P3") for seed in (3, 1, 2, 0)]
    return first + [t for t in rest if t not in first]


def hopeless_tries(api: str) -> list[tuple[ProblemParams, int, int]]:
    """Sessions that accept nothing."""
    seeds = HOPELESS_FIRST[api] + [s for s in range(1, 9) if s not in HOPELESS_FIRST[api]]
    return [(HOPELESS, seed, 800_000) for seed in seeds]


def page_and_audit_agree(run: Path) -> page_rules.Verdicts:
    """The page's verifier and ``solver audit`` both find the run clean."""
    contexts, bodies, problems = page_loop_problems(run)
    assert problems == [] and bodies >= contexts
    verdicts = page_rules.isolation(run)
    assert verdicts.problems == []
    assert verdicts.contexts == contexts
    assert audit_row(run, "isolation") == ("pass", [])
    assert audit_row(run, "prompts") == ("pass", [])
    return verdicts


def lab_runs_until(
    root: Path, api: str, tries: list[tuple[ProblemParams, int, int]], wanted: set[str], **kw: Any
) -> tuple[list[Path], dict[str, int]]:
    """Lab sessions, each checked by both verifiers, until every ``wanted`` kind occurred."""
    runs: list[Path] = []
    seen: dict[str, int] = {}
    for n, (params, seed, budget) in enumerate(tries):
        run = lab_run(root / f"{api}-{n}", api, params, seed, budget, 4, **kw)
        page_and_audit_agree(run)
        runs.append(run)
        for kind, count in call_kinds(run).items():
            seen[kind] = seen.get(kind, 0) + count
        if wanted <= set(seen):
            break
    return runs, seen


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_every_later_call_kind_re_made_from_the_page(tmp_path: Path, api: str) -> None:
    _, seen = lab_runs_until(tmp_path / "accepting", api, accepting_tries(api), ACCEPTING)
    assert ACCEPTING | {"final_passed", "recheck_passed"} <= set(seen), seen
    hopeless = hopeless_tries(api)
    _, seen = lab_runs_until(tmp_path / "hopeless", api, hopeless, UNACCEPTED)
    assert set(seen) >= UNACCEPTED, seen
    # Without pairwise selection, the one selector call ranks the versions by their grades.
    _, seen = lab_runs_until(
        tmp_path / "single", api, hopeless, {"grade.n", "selector"}, pairwise=False
    )
    assert {"grade.n", "selector"} <= set(seen), seen


def write_blob(run: Path, data: bytes) -> dict[str, object]:
    """Store ``data`` as the page says a blob is stored; its reference."""
    digest = h(data)
    path = run / "blobs" / "sha256" / digest[7:9] / digest[7:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"blob": digest, "bytes": len(data)}


def give_input(run: Path, records: list[dict[str, Any]], artifact: str, texts: list[str]) -> int:
    """Hand the call whose input ``artifact`` is another list of texts, consistently (the
    artifact, the context's link and its inputs all name the new list); the artifact's seq."""
    content = json.dumps(texts, indent=2, ensure_ascii=False).encode()
    ref = write_blob(run, content)
    put = next(
        r for r in records if r["type"] == "artifact.put" and r["data"]["artifact"] == artifact
    )
    put["data"]["blob"] = ref
    built = next(
        r
        for r in records
        if r["type"] == "context.built"
        and any(
            link["artifact"] == artifact for links in r["data"]["links"].values() for link in links
        )
    )
    inputs = json.loads(read_blob(run, built["data"]["inputs"]["blob"]))
    for name, links in built["data"]["links"].items():
        for link in links:
            if link["artifact"] == artifact:
                link["blob"] = ref["blob"]
                inputs[name] = texts
    built["data"]["inputs"] = write_blob(run, canonical(inputs))
    return int(put["seq"])


def forged_verdicts(
    run: Path, records: list[dict[str, Any]]
) -> tuple[list[str], tuple[str, list[str]]]:
    rechain(run, records)
    return page_rules.isolation(run).problems, audit_row(run, "isolation")


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_page_and_the_audit_flag_the_same_forged_pool_and_pair(
    tmp_path: Path, api: str
) -> None:
    runs, _ = lab_runs_until(tmp_path, api, accepting_tries(api), {"recombine", "pairwise"})
    (run,) = [r for r in runs if {"recombine", "pairwise"} <= set(call_kinds(r))][:1]
    pristine = (run / "journal.jsonl").read_bytes()

    def records() -> list[dict[str, Any]]:
        return [json.loads(line) for line in pristine.splitlines()]

    def artifacts(journal: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        return [
            r["data"] for r in journal if r["type"] == "artifact.put" and r["data"]["kind"] == kind
        ]

    # A recombination shown its pool without the findings confirmed on the first proof.
    journal = records()
    pool = artifacts(journal, "pooled_proofs")[0]
    texts = json.loads(read_blob(run, pool["blob"]["blob"]))
    proof, _, _ = texts[0].partition("\n\n### Confirmed findings on this proof\n\n")
    texts[0] = proof + "\n\n### Confirmed findings on this proof\n\n(no finding was confirmed)"
    seq = give_input(run, journal, pool["artifact"], texts)
    assert forged_verdicts(run, journal) == (
        [f"seq {seq}: {pool['artifact']} is not what the journal derives"],
        ("fail", [f"journal.jsonl seq {seq}"]),
    )
    # A pairwise call shown its two proofs in the other call's order.
    journal = records()
    pair = next(
        a for a in artifacts(journal, "anonymised_proofs") if a["artifact"].endswith(".ab.proofs")
    )
    texts = json.loads(read_blob(run, pair["blob"]["blob"]))
    seq = give_input(run, journal, pair["artifact"], texts[::-1])
    assert forged_verdicts(run, journal) == (
        [f"seq {seq}: {pair['artifact']} is not what the journal derives"],
        ("fail", [f"journal.jsonl seq {seq}"]),
    )

    # Re-declared targets, with inputs made from them as the page says: the two verifiers
    # agree on which declarations are allowed (another graded version, another order) and
    # which are not (a version no grader saw, one proof twice, a pool of one, no proof).
    journal = records()
    proofs = {
        f"{r['data']['lineage']}.v{r['data']['version']}": r["data"]
        for r in journal
        if r["type"] == "artifact.put" and r["data"]["kind"] == "proof_text"
    }
    graded = {
        f"{r['data']['lineage']}.v{r['data']['version']}"
        for r in journal
        if r["type"] == "call.planned" and r["data"]["phase"] == "grade"
    }
    pairwise = next(
        r["data"]
        for r in journal
        if r["type"] == "call.planned" and r["data"]["role"] == "selector"
    )
    shown = pairwise["target"].split(",")
    # Only accepted proofs are graded when some are, so a graded version outside the pair
    # exists only when more proofs were accepted than shown; else the pair in the other order.
    others = sorted(graded - set(shown))
    alternative = f"{shown[0]},{others[0]}" if others else f"{shown[1]},{shown[0]}"
    never_graded = sorted(set(proofs) - graded)[0]
    recombine = next(
        r["data"]
        for r in journal
        if r["type"] == "call.planned" and r["data"]["role"] == "reviser:recombine"
    )
    pooled = recombine["target"].split(",")
    for call, target, allowed in [
        (pairwise, alternative, True),
        (pairwise, f"{shown[0]},{never_graded}", False),
        (pairwise, f"{shown[0]},{shown[0]}", False),
        (recombine, ",".join(pooled[::-1]), True),
        (recombine, pooled[0], False),
        (recombine, f"{pooled[0]},{pooled[1].split('.')[0]}.v99", False),
    ]:
        journal = records()
        seq = retarget(run, journal, call["call_id"], target)
        problems, row = forged_verdicts(run, journal)
        if allowed:
            assert (problems, row) == ([], ("pass", [])), target
        else:
            name = next(r["data"]["artifact"] for r in journal if r["seq"] == seq)
            assert problems == [f"seq {seq}: {name} cannot be derived from its call's target"]
            assert row == ("fail", [f"journal.jsonl seq {seq}"]), target


def retarget(run: Path, journal: list[dict[str, Any]], call_id: str, target: str) -> int:
    """Re-declare ``call_id``'s target and give it the input the page derives from that
    target (what proofs exist is read from the journal); the input artifact's seq."""
    planned = next(
        r for r in journal if r["type"] == "call.planned" and r["data"]["call_id"] == call_id
    )
    planned["data"]["target"] = target
    recombine = planned["data"]["role"] == "reviser:recombine"
    name = call_id + (".pool" if recombine else ".proofs")
    put = next(r for r in journal if r["type"] == "artifact.put" and r["data"]["artifact"] == name)
    fold = page_rules.Fold()
    for record in journal[: put["seq"]]:
        fold.apply(record["type"], record["data"])
    texts, names, reviews = [], [], []
    for item in target.split(","):
        version = page_rules.version_of(item)
        assert version is not None
        proof = fold.proofs.get(version, "")
        names.append(proof)
        text = read_blob(run, fold.artifacts[proof]["blob"]["blob"]).decode() if proof else ""
        if recombine:
            findings, reviewers = page_rules.findings_of_version(fold, *version)
            heading = "\n\n### Confirmed findings on this proof\n\n"
            text = text.strip() + heading + (findings or "(no finding was confirmed)")
            reviews += reviewers
        texts.append(text)
    seq = give_input(run, journal, name, texts)
    put["data"]["producer"] = ",".join(names + reviews)
    return seq
