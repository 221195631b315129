"""What each call is given, and what its output means to the loop.

``build`` assembles a role's declared Inputs from artifacts already in the journal and nothing
else: the orchestrator writes no text of its own into a prompt. Derived inputs (the reviser's
confirmed findings, formatted by ``reviser.format_findings``; the selector's anonymised proofs)
are pure functions of recorded model output, stored as artifacts of their own so the audit can
check them.
``interpret`` turns a completion into the parsed output, the facts the policy needs and the
artifacts other roles may later see.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from solver import roles
from solver.loop.policy import selection_pool
from solver.loop.state import (
    PRODUCER_ROLES,
    CallState,
    RunState,
    confirmed_findings,
    findings_of,
    pair_of,
    pool_sources,
    revision_source,
)
from solver.problems import Problem
from solver.records import (
    ArtifactPut,
    BlobLink,
    Facts,
    GradeFacts,
    InputLink,
    NoFacts,
    NotUsedFacts,
    ProofFacts,
)
from solver.roles import generator, grader, reviewer, reviser, rubric_writer, selector, verifier
from solver.store import BlobRef, RunStore
from solver.wire import Completion

# A cautious bytes-per-token ratio for budget estimates (English and LaTeX run nearer four).
BYTES_PER_TOKEN = 3
# The inputs the loop derives from recorded output rather than reads, each stored as an
# artifact of its own, named the call's id plus this suffix, so the audit can rebuild it.
DERIVED_SUFFIX: dict[str, str] = {
    "confirmed_findings": ".findings",
    "pooled_proofs": ".pool",
    "anonymised_proofs": ".proofs",
}
# The calls whose proof is the version they start from (their target names it), not their own.
_REVISING = frozenset({reviser.NAME, generator.IMPROVE})


def tokens_estimate(size: int) -> int:
    """Tokens in ``size`` bytes or characters of text, on the high side."""
    return size // BYTES_PER_TOKEN + 1


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class BuiltContext:
    inputs: BaseModel
    inputs_json: bytes
    messages: tuple[tuple[str, str], ...]
    messages_json: bytes
    templates: dict[str, str]
    links: dict[str, list[InputLink]]
    new_artifacts: list[ArtifactPut] = field(default_factory=list)


@dataclass(frozen=True)
class Interpreted:
    output_json: bytes
    parsed_ok: bool
    truncated: bool
    facts: Facts
    artifacts: list[ArtifactPut]


def confirmed_findings_text(state: RunState, lineage: str, version: int) -> str:
    """What the reviser of ``lineage`` v``version`` is shown: the findings its reviews
    confirmed (with the reviewed severity), one per flaw (duplicates merged) and renumbered
    C1, C2, ... by ``reviser.format_findings``, so no verifier's ids or count shows through.
    A pure function of the folded journal: the audit re-derives the artifact with it."""
    return reviser.format_findings(confirmed_findings(state, lineage, version))


class ContextBuilder:
    def __init__(self, store: RunStore, state: RunState, problem: Problem, *, seed: int) -> None:
        self.store = store
        self.state = state
        self.problem = problem
        self.seed = seed
        self._texts: dict[str, str] = {}
        self._dry = False

    def input_estimate(self, call: CallState) -> int:
        """Tokens the call's prompt may take, on the high side (a token is rarely under three
        bytes of the rendered messages): what the token budget reserves for its input."""
        self._dry = True
        try:
            built = self.build(call)
        finally:
            self._dry = False
        return tokens_estimate(len(built.messages_json))

    # ------------------------------------------------------------ reading artifacts

    def text(self, artifact: str) -> str:
        if artifact not in self._texts:
            info = self.state.artifacts[artifact]
            self._texts[artifact] = self.store.read_blob(info.blob).decode("utf-8")
        return self._texts[artifact]

    def _link(self, kind: str, artifact: str) -> InputLink:
        return InputLink(kind=kind, artifact=artifact, blob=self.state.artifacts[artifact].blob)

    def _proof_artifact(self, lineage: str | None, version: int | None) -> str:
        assert lineage is not None and version is not None
        found = self.state.lineages[lineage].versions[version].proof_artifact
        assert found is not None, f"{lineage}.v{version} has no proof"
        return found

    def _new_artifact(
        self, artifact: str, kind: str, data: bytes, producer: str, call: CallState
    ) -> ArtifactPut:
        # An estimate builds a context that may never be used: it must not write blobs.
        if self._dry:
            ref = BlobRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size=len(data))
        else:
            ref = self.store.put_blob(data)
        self._texts[artifact] = data.decode("utf-8")
        return ArtifactPut(
            artifact=artifact,
            kind=kind,
            blob=BlobLink(blob=ref.digest, bytes=ref.size),
            producer=producer,
            lineage=call.lineage,
            version=call.version,
        )

    # ------------------------------------------------------------ building contexts

    def build(self, call: CallState) -> BuiltContext:
        """The call's inputs, field by field as its role's ``Inputs`` declares them. That
        declaration is the one statement of what a role may see (the isolation policy and
        the audit read it too); this says only where each declared field's text comes from."""
        fields: dict[str, Any] = {}
        links: dict[str, list[InputLink]] = {}
        new: list[ArtifactPut] = []
        role = call.role
        for name, kind in roles.get_role(role).inputs_model.KINDS.items():
            if kind in DERIVED_SUFFIX:
                artifact = self.derived_artifact(kind, call)
                new.append(artifact)
                text = self._texts[artifact.artifact]
                fields[name] = text if kind == "confirmed_findings" else tuple(json.loads(text))
                links[name] = [
                    InputLink(kind=kind, artifact=artifact.artifact, blob=artifact.blob.blob)
                ]
                continue
            source = self._source(call, name, kind)
            if source is None:
                continue  # organisers' material this problem does not have
            if isinstance(source, list):
                fields[name] = tuple(self.text(a) for a in source)
                links[name] = [self._link(kind, a) for a in source]
            else:
                fields[name] = self.text(source)
                links[name] = [self._link(kind, source)]
        inputs = roles.get_role(role).inputs_model.model_validate(fields)
        messages = roles.render(role, call.variant, inputs)
        templates = roles.template_digests()
        return BuiltContext(
            inputs=inputs,
            inputs_json=canonical(inputs.model_dump(mode="json")),
            messages=messages,
            messages_json=canonical([list(m) for m in messages]),
            templates={name: templates[name] for name in roles.templates_for(role, call.variant)},
            links=links,
            new_artifacts=new,
        )

    def _source(self, call: CallState, name: str, kind: str) -> str | list[str] | None:
        """The recorded artifact(s) a declared input field is read from; None for optional
        material the run lacks."""
        if kind == "problem_statement":
            return "problem"
        if kind == "proof_text":
            lineage, version = call.lineage, call.version
            if call.role in _REVISING and call.lineage is not None:
                lineage, version = revision_source(call.target, call.lineage) or (lineage, version)
            return self._proof_artifact(lineage, version)
        if kind == "verification_report":
            return f"{call.target}.report"
        if kind in roles.REFERENCE_KINDS:
            return kind if kind in self.state.artifacts else None
        if kind == "grader_judgments":
            own = f"{call.target}.judgment"
            if name == "own_judgment":
                return own
            every = sorted(
                a for a, info in self.state.artifacts.items() if info.kind == "grader_judgments"
            )
            return [a for a in every if a != own] if name == "other_judgments" else every
        raise ValueError(f"{call.call_id}: no source for input {name} ({kind})")

    def derived_artifact(self, kind: str, call: CallState) -> ArtifactPut:
        """The input of ``kind`` (one of DERIVED_SUFFIX) the loop derives for ``call`` from
        the folded journal; the audit rebuilds each recorded one with this."""
        if kind == "confirmed_findings":
            return self._confirmed_findings_artifact(call)
        if kind == "pooled_proofs":
            return self._pooled_proofs_artifact(call)
        if kind == "anonymised_proofs":
            return self._anonymised_proofs_artifact(call)
        raise ValueError(f"{kind} is not a derived input")

    def _confirmed_findings_artifact(self, call: CallState) -> ArtifactPut:
        assert call.lineage is not None and call.target is not None
        lineage, parent = revision_source(call.target, call.lineage) or (call.lineage, -1)
        data = confirmed_findings_text(self.state, lineage, parent).encode()
        return self._new_artifact(
            f"{call.call_id}.findings",
            "confirmed_findings",
            data,
            ",".join(self._reviews_of(lineage, parent)),
            call,
        )

    def _reviews_of(self, lineage: str, version: int) -> list[str]:
        return sorted(
            c.call_id
            for c in self.state.calls.values()
            if c.role == "reviewer" and c.lineage == lineage and c.version == version
        )

    def _pooled_proofs_artifact(self, call: CallState) -> ArtifactPut:
        """A recombination's pool: each declared source's proof with its confirmed findings.
        The declaration (the call's target) must name 2 to 4 versions of distinct lineages
        other than the call's own, each with a proof; the audit rebuilds this artifact with
        this function, so a proof or finding from anywhere else fails it."""
        sources = pool_sources(call.target)
        lineages = {lineage for lineage, _ in sources}
        low, high = reviser.POOL_SIZES
        assert low <= len(sources) <= high, f"{call.call_id} declares {len(sources)} proofs"
        assert len(lineages) == len(sources), f"{call.call_id} declares a lineage twice"
        assert call.lineage not in lineages, f"{call.call_id} declares its own lineage"
        entries = [
            reviser.format_pool_entry(
                self.text(self._proof_artifact(lineage, version)),
                confirmed_findings_text(self.state, lineage, version),
            )
            for lineage, version in sources
        ]
        producers = [self._proof_artifact(lineage, version) for lineage, version in sources]
        for lineage, version in sources:
            producers += self._reviews_of(lineage, version)
        data = json.dumps(entries, indent=2, ensure_ascii=False).encode()
        return self._new_artifact(
            f"{call.call_id}.pool", "pooled_proofs", data, ",".join(producers), call
        )

    def selector_order(self) -> list[tuple[str, int]]:
        pool = [(v.lineage, v.version) for v in selection_pool(self.state)]
        rng = random.Random(f"{self.seed}:{self.problem.digest}")
        rng.shuffle(pool)
        return pool

    def shown_to(self, call: CallState) -> list[tuple[str, int]]:
        """The proofs a selector call is shown, in order: a pairwise call's two, as its
        target names them (A first); the single selector's whole pool, shuffled."""
        return pair_of(call.target) if call.target else self.selector_order()

    def _anonymised_proofs_artifact(self, call: CallState) -> ArtifactPut:
        shown = self.shown_to(call)
        texts = [self.text(self._proof_artifact(ln, v)) for ln, v in shown]
        data = json.dumps(texts, indent=2, ensure_ascii=False).encode()
        producers = ",".join(self._proof_artifact(ln, v) for ln, v in shown)
        return self._new_artifact(
            f"{call.call_id}.proofs", "anonymised_proofs", data, producers, call
        )

    # ------------------------------------------------------------ interpreting outputs

    def interpret(self, call: CallState, completion: Completion) -> Interpreted:
        spec = roles.get_role(call.role)
        truncated = completion.finish_reason == "length"
        if truncated or completion.finish_reason not in ("stop", "tool_calls"):
            output = spec.conservative
            return Interpreted(
                output_json=canonical(output.model_dump(mode="json")),
                parsed_ok=False,
                truncated=truncated,
                facts=NotUsedFacts(not_used=f"finish reason {completion.finish_reason}"),
                artifacts=[],
            )
        output = spec.parse(completion.text)
        facts, artifacts = self._facts(call, output, completion)
        return Interpreted(
            output_json=canonical(output.model_dump(mode="json")),
            parsed_ok=output.parsed and facts.usable,
            truncated=False,
            facts=facts,
            artifacts=artifacts,
        )

    def _facts(
        self, call: CallState, output: roles.RoleOutput, completion: Completion
    ) -> tuple[Facts, list[ArtifactPut]]:
        if call.role in PRODUCER_ROLES:
            proof = roles.extract_proof(completion.text)
            facts = proof.facts()
            if not facts.has_proof:
                return facts, []
            # A revision, a recombination or a self-improvement must stand alone.
            said = reviser.commentary(proof.proof) if call.role != "generator" else None
            if said is not None:
                return ProofFacts(has_proof=False, commentary=said), []
            artifact = self._new_artifact(
                f"{call.lineage}.v{call.version}.proof",
                "proof_text",
                proof.proof.encode(),
                call.call_id,
                call,
            )
            return facts, [artifact]
        if isinstance(output, verifier.Output):
            # The reviewer sees the parsed findings under the ids the loop keys its decisions
            # on; the raw text may repeat or omit ids, which would send a rejection astray.
            report = verifier.format_report(output)
            artifact = self._new_artifact(
                f"{call.call_id}.report", "verification_report", report.encode(), call.call_id, call
            )
            return output.facts(), [artifact]
        if isinstance(output, reviewer.Output):
            return output.facts(findings_of(self.state.calls[call.target or ""])), []
        if isinstance(output, rubric_writer.Output):
            if not output.parsed:
                return NoFacts(), []
            scheme = rubric_writer.format_scheme(output).encode()
            artifact = self._new_artifact(
                "marking_scheme", "marking_scheme", scheme, call.call_id, call
            )
            return NoFacts(), [artifact]
        if isinstance(output, grader.Output):
            grade = output.facts()
            if grade.score is not None and call.variant == "proofbench":
                grade = GradeFacts(score=grader.on_scale(grade.score))
            if call.phase == "evaluate" and call.role in ("grader", "grader:evaluation"):
                judgment = roles.strip_thinking(completion.text).strip() or "(empty judgment)"
                artifact = self._new_artifact(
                    f"{call.call_id}.judgment",
                    "grader_judgments",
                    judgment.encode(),
                    call.call_id,
                    call,
                )
                return grade, [artifact]
            return grade, []
        if isinstance(output, selector.Output):
            return output.facts(self.shown_to(call)), []
        return NoFacts(), []
