"""The pure policy: given the folded state, what happens next.

``decide`` returns either decisions to record (which change the state; call ``decide`` again
after applying them), calls to make, calls to cancel, or the finish. It reads no clock (the
caller passes the elapsed wall time) and does no I/O, so the same journal always yields the
same next step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solver.loop.grading import (
    Aggregation,
    EvaluationRules,
    Reconcile,
    Scale,
    evaluation_calls,
    evaluation_score,
    evaluation_step,
    evaluation_summary,
    graded_score,
)
from solver.loop.state import (
    BLOCKING_SEVERITIES,
    GIVEN,
    CallState,
    LineageState,
    RunState,
    VersionState,
    accepted_of,
    answer_groups,
    call_ordinal,
    check_calls,
    confirmed_findings,
    disputed_versions,
    failing_report,
    finding_keys,
    findings_of,
    given_comparisons,
    grade_call_id,
    graded_versions,
    lineage_index,
    pair_target,
    picked,
    review_calls,
    review_running,
    review_verdicts,
    seeded_sources,
    unreviewed_verdicts,
    verdict_of,
    verification_calls,
)
from solver.records import (
    CallPlanned,
    Decision,
    Outcome,
    SelectionFacts,
)
from solver.roles import UNREVIEWED, VERIFIER_CHECK

# Names of the evaluation phase (solver.loop.grading) that callers still import from here.
__all__ = ["evaluation_calls", "evaluation_score", "graded_score"]


@dataclass(frozen=True)
class PolicyConfig:
    candidates: int = 4
    verifications: int = 5  # K
    accepted_needed: int = 2  # A
    max_failed_rounds: int = 10
    max_lineages: int = 12
    abandon_on_recurring: bool = True
    wall_clock_s: float | None = None
    total_tokens: int | None = None
    calls: int | None = None
    evaluation: bool = False
    evaluation_graders: int = 1
    evaluation_material: bool = True  # a reference solution or guidelines exist
    reconcile_spread: int = 2
    # A grading-only run: verifications of the given proof by each verifier variant, run beside
    # its grading (what `solver eval calibrate --verifications` measures the verifiers with).
    given_verifications: int = 0
    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The search policy's settings (docs/bench-policy.md measures each in the policy lab).
    reverify_no_verdict: bool = False  # a verification without a verdict is issued again
    max_verifications: int = 0  # per version, reissues included; 0 = 2 x K
    overturned_fail_passes: bool = True  # False: a fail whose findings were all rejected is
    # replaced by a fresh verification instead of counting as a pass
    verify_stage: int = 0  # verifications asked first; the rest only if all pass (0 = K at once)
    cancel_on_blocking: bool = False  # cancel a version's verifications once one fails it
    # A reviewer checks each failing report's findings; False: they stand as the verifier
    # reported them (a fail is a fail), as in Huang & Yang's and DeepSeek-Math-V2's code.
    review: bool = True
    review_minor_on_pass: bool = True  # review a passing report that has only minor findings
    recurrence_rounds: int = 1  # consecutive rounds a confirmed finding must recur to abandon
    # Once a lineage is accepted, only this many of the others (the furthest along) take
    # their next step; the rest wait their turn (0: all go on).
    focus_after_accept: int = 0
    # Lineages run side by side until a round fails somewhere (0: ``candidates`` from the start).
    start_lineages: int = 0
    # Lineages beyond ``candidates`` start while fewer calls than this are in flight or
    # planned, so slots the staging of ``candidates`` lineages leaves idle do work (0: off).
    fill: int = 0
    # A report with any finding, a minor one included, does not pass (DeepSeek-Math-V2's
    # 0.5 for minor errors, which keeps a proof's mean score below the 1 it accepts).
    minor_blocks: bool = False
    best_version: bool = False  # revise from and submit each lineage's best version
    # A fresh proof gets a second turn of its generator (check and improve) before verification.
    self_improve: bool = False
    # Restarts (lineages beyond the first ``candidates``) take turns among: from scratch, from
    # the best proof of an abandoned lineage (a revision of it with its confirmed findings),
    # and a recombination of the best proofs of ``recombine`` (2-4) different lineages.
    restart_from_pool: bool = False
    recombine: int = 0
    # A failed round is revised from the best proof of the whole search (every lineage's best
    # failed version with confirmed findings, as the pool ranks them), not the lineage's own:
    # DeepSeek-Math-V2 refines the proofs of highest mean score of its whole pool.
    refine_from_pool: bool = False
    final_verifications: int = 0  # a last, larger round for each accepted proof (0 = off)
    # The later checks (final and recheck rounds) run as ``verifier:check`` calls, on the
    # checker's endpoint (``roles.checker``, another model family); False: verifier calls.
    checks_by_checker: bool = False
    recheck_answers: bool = False  # accepted proofs with different final answers: more rounds
    # The run stops only on ``accepted_needed`` accepted proofs that state one final answer;
    # those outvoted are then no longer accepted.
    answers_agree: bool = False
    pairwise_selection: bool = False  # choose by a bracket of pairwise comparisons
    final_grades: int = 1  # grades of each final proof when none is accepted (median)
    reconcile: Reconcile = "rejudge"
    aggregation: Aggregation = "min"
    grading_scale: Scale = "points"
    draft_scheme: bool = False

    def variant(self, role: str, ordinal: int) -> str:
        options = self.variants.get(role) or ("default",)
        return options[ordinal % len(options)]

    @property
    def evaluation_rules(self) -> EvaluationRules:
        return EvaluationRules(
            graders=self.evaluation_graders,
            material=self.evaluation_material,
            draft_scheme=self.draft_scheme,
            reconcile_spread=self.reconcile_spread,
            reconcile=self.reconcile,
            aggregation=self.aggregation,
            scale=self.grading_scale,
        )


@dataclass(frozen=True)
class RunEnd:
    """How the policy ends the run: its outcome, the proof submitted, and why."""

    outcome: Outcome
    selected: tuple[str, int] | None
    reason: str
    evaluation: dict[str, Any] | None = None  # the evaluation grading, when there was one


@dataclass(frozen=True)
class Step:
    decisions: tuple[Decision, ...] = ()
    calls: tuple[CallPlanned, ...] = ()
    cancel: tuple[str, ...] = ()
    finish: RunEnd | None = None

    @property
    def idle(self) -> bool:
        return not (self.decisions or self.calls or self.cancel or self.finish)


def decide(state: RunState, cfg: PolicyConfig, elapsed_s: float) -> Step:
    if state.phase == "solve":
        return _solve(state, cfg, elapsed_s)
    if state.phase == "grade":
        return _grade(state, cfg)
    if state.phase == "select":
        return _select(state, cfg)
    if state.phase == "evaluate":
        return _evaluate(state, cfg)
    return Step()


# ---------------------------------------------------------------- solve


def _budget_reason(state: RunState, cfg: PolicyConfig, elapsed_s: float) -> str:
    if cfg.wall_clock_s is not None and elapsed_s >= cfg.wall_clock_s:
        return f"wall clock budget of {cfg.wall_clock_s:g} s used"
    if cfg.total_tokens is not None and state.tokens_total >= cfg.total_tokens:
        return f"token budget of {cfg.total_tokens} used"
    return ""


def _leave_solve(
    state: RunState, reason: str, budget: bool, unchecked: tuple[Decision, ...] = ()
) -> Step:
    decisions: list[Decision] = list(unchecked)
    if budget and not state.budget_exhausted:
        decisions.append(Decision(kind="budget_exhausted", reason=reason))
    decisions.append(Decision(kind="phase", phase="grade", reason=reason))
    cancel = tuple(c.call_id for c in state.in_flight() if c.phase == "solve")
    return Step(decisions=tuple(decisions), cancel=cancel)


def _solve(state: RunState, cfg: PolicyConfig, elapsed_s: float) -> Step:
    # The engine records the budget's end itself when what is left cannot fit a call's prompt.
    reason = _budget_reason(state, cfg, elapsed_s) or state.budget_exhausted
    disputed = disputed_versions(state) if cfg.recheck_answers else set()
    if reason:
        return _leave_solve(state, reason, budget=True, unchecked=_unchecked(state, cfg, disputed))
    done = [ln for ln in state.accepted() if _due_check(state, ln, cfg, disputed) is None]
    outvoted: tuple[Decision, ...] = ()
    if cfg.answers_agree:
        done, outvoted = _agreeing(state, done)
    if len(done) >= cfg.accepted_needed:
        return _leave_solve(
            state,
            f"{len(done)} candidates accepted",
            budget=False,
            unchecked=outvoted + _unchecked(state, cfg, disputed),
        )
    barren = _barren_search(state, cfg)
    if barren:
        return _leave_solve(state, barren, budget=False, unchecked=_unchecked(state, cfg, disputed))

    decisions: list[Decision] = []
    calls: list[CallPlanned] = []
    cancel: list[str] = []
    for lineage in _stepping(state, cfg):
        d, c = _lineage_step(state, lineage, cfg)
        decisions.extend(d)
        calls.extend(c)
        if d and cfg.cancel_on_blocking and lineage.latest is not None:
            cancel.extend(_unneeded_verifications(state, lineage.lineage, lineage.latest))
    for lineage in sorted(state.accepted(), key=lambda ln: ln.index):
        d, c, x = _checks_step(state, lineage, cfg, disputed)
        decisions.extend(d)
        calls.extend(c)
        cancel.extend(x)
    if decisions:
        return Step(decisions=tuple(decisions), cancel=tuple(cancel))

    active = sum(1 for ln in state.lineages.values() if ln.active)
    open_slots = _width(state, cfg) - active - len(state.accepted())
    next_index = len(state.lineages)
    seeded = seeded_sources(state)
    while open_slots > 0 and next_index < cfg.max_lineages:
        calls.append(_new_lineage_call(state, next_index, cfg, seeded))
        open_slots -= 1
        next_index += 1
    busy = len(state.in_flight()) + len(calls)
    while busy < cfg.fill and next_index < cfg.max_lineages:
        calls.append(_new_lineage_call(state, next_index, cfg, seeded))
        busy += 1
        next_index += 1

    if cfg.calls is not None:
        room = cfg.calls - state.solve_calls()
        calls = calls[: max(room, 0)]
        solving = any(c.phase == "solve" for c in state.in_flight())
        if not calls and not solving and room <= 0:
            return _leave_solve(
                state,
                f"call budget of {cfg.calls} used",
                budget=True,
                unchecked=_unchecked(state, cfg, disputed),
            )
    if not calls and not state.in_flight():
        return _leave_solve(state, "no lineage can go on", budget=False)
    return Step(calls=tuple(calls))


def _width(state: RunState, cfg: PolicyConfig) -> int:
    """How many lineages, accepted ones included, run side by side: ``candidates``; with
    ``start_lineages``, that many (and one beyond those accepted) until a round fails
    somewhere, since a problem whose first proofs all pass needs no more."""
    if not cfg.start_lineages or cfg.start_lineages >= cfg.candidates:
        return cfg.candidates
    failed = any(
        v.status in ("failed", "unusable")
        for ln in state.lineages.values()
        for v in ln.versions.values()
    )
    if failed:
        return cfg.candidates
    return min(max(cfg.start_lineages, len(state.accepted()) + 1), cfg.candidates)


def _stepping(state: RunState, cfg: PolicyConfig) -> list[LineageState]:
    """The active lineages that take their next step now, in index order: all of them, or,
    with ``focus_after_accept`` and a lineage accepted, the ones furthest along (the others'
    calls in flight still finish; they go on when one of these ends)."""
    active = sorted((ln for ln in state.lineages.values() if ln.active), key=lambda ln: ln.index)
    if not cfg.focus_after_accept or not state.accepted():
        return active
    ranked = sorted(active, key=lambda ln: _progress(state, ln, cfg), reverse=True)
    chosen = {ln.lineage for ln in ranked[: cfg.focus_after_accept]}
    return [ln for ln in active if ln.lineage in chosen]


def _progress(state: RunState, lineage: LineageState, cfg: PolicyConfig) -> tuple[int, float, int]:
    """How far along a lineage is: the passes its open version has so far, then its best
    version's pass rate, then the older lineage."""
    latest, passes = lineage.latest, 0
    if latest is not None and latest.status == "open":
        passes = sum(
            1
            for c in verification_calls(state, lineage.lineage, latest.version)
            if verification_outcome(state, c, cfg) == "pass"
        )
    best = best_version(state, lineage, cfg)
    rate = (pass_rate(state, lineage.lineage, best.version, cfg) or 0.0) if best else 0.0
    return passes, rate, -lineage.index


def _barren_search(state: RunState, cfg: PolicyConfig) -> str:
    """Why the search can find nothing: as many proof-writing calls in a row failed as every
    candidate's failed rounds allow, none completing between them (a setup the endpoint
    refuses, such as a prompt the served context leaves too little room after). Failed calls
    spend no budget, so a search whose lineages follow the budget would never end; "" while
    the search may go on."""
    failed = state.producer_failures_in_a_row
    if failed < cfg.candidates * cfg.max_failed_rounds:
        return ""
    return f"{failed} proof-writing calls in a row failed, none completed"


def _generator_call(lineage: str, version: int, ordinal: int, cfg: PolicyConfig) -> CallPlanned:
    return CallPlanned(
        call_id=f"{lineage}.v{version}.generate",
        role="generator",
        variant=cfg.variant("generator", ordinal + version),
        phase="solve",
        lineage=lineage,
        version=version,
    )


# ---------------------------------------------------------------- restarts


def _pool_rank(state: RunState, version: VersionState, cfg: PolicyConfig) -> tuple[float, int, int]:
    """Better first: a higher pass rate, then fewer confirmed blocking findings, then older."""
    rate = pass_rate(state, version.lineage, version.version, cfg) or 0.0
    blocking = [
        f
        for f in confirmed_findings(state, version.lineage, version.version)
        if f.severity in BLOCKING_SEVERITIES
    ]
    return rate, -len(blocking), -state.lineages[version.lineage].index


def _pool(state: RunState, cfg: PolicyConfig, abandoned_only: bool) -> list[VersionState]:
    """Each lineage's best verified proof with confirmed findings, best first; lineages that
    were accepted are left out (a copy of an accepted proof is no independent candidate)."""
    best: list[VersionState] = []
    for lineage in state.lineages.values():
        if lineage.accepted_version is not None or (abandoned_only and not lineage.abandoned):
            continue
        version = best_version(state, lineage, cfg)
        if (
            version is not None
            and version.status == "failed"
            and confirmed_findings(state, version.lineage, version.version)
        ):
            best.append(version)
    return sorted(best, key=lambda v: _pool_rank(state, v, cfg), reverse=True)


def _new_lineage_call(
    state: RunState, index: int, cfg: PolicyConfig, seeded: set[frozenset[tuple[str, int]]]
) -> CallPlanned:
    """The first call of lineage ``index``. The first ``candidates`` lineages start from
    scratch; the restarts after them take turns among the kinds the settings turn on (from
    the pool's best, a recombination) and from scratch, in that order, and start from scratch
    when their kind has nothing new to start from."""
    name = f"L{index}"
    kinds = [
        *(["pool"] if cfg.restart_from_pool else []),
        *(["recombine"] if cfg.recombine >= 2 else []),
        "scratch",
    ]
    kind = kinds[(index - cfg.candidates) % len(kinds)] if index >= cfg.candidates else "scratch"
    if kind == "pool":
        for version in _pool(state, cfg, abandoned_only=True):
            source = (version.lineage, version.version)
            if frozenset({source}) not in seeded:
                seeded.add(frozenset({source}))
                return CallPlanned(
                    call_id=f"{name}.v0.revise",
                    role="reviser",
                    variant=_reviser_variant(cfg),
                    phase="solve",
                    lineage=name,
                    version=0,
                    target=f"{version.lineage}.v{version.version}",
                )
    if kind == "recombine":
        chosen = _pool(state, cfg, abandoned_only=False)[: min(cfg.recombine, 4)]
        sources = [(v.lineage, v.version) for v in chosen]
        if len(sources) >= 2 and frozenset(sources) not in seeded:
            seeded.add(frozenset(sources))
            return CallPlanned(
                call_id=f"{name}.v0.recombine",
                role="reviser:recombine",
                variant=cfg.variant("reviser:recombine", 0),
                phase="solve",
                lineage=name,
                version=0,
                target=",".join(f"{ln}.v{v}" for ln, v in sources),
            )
    return _generator_call(name, 0, index, cfg)


def _improve_call(lineage: str, draft: VersionState, producer: CallState) -> CallPlanned:
    """The generator's second turn on its own fresh proof: the next version of the lineage."""
    return CallPlanned(
        call_id=f"{lineage}.v{draft.version + 1}.improve",
        role="generator:improve",
        variant=producer.variant,  # the same conversation: the same system prompt
        phase="solve",
        lineage=lineage,
        version=draft.version + 1,
        target=str(draft.version),
    )


# ---------------------------------------------------------------- one lineage


def _lineage_step(
    state: RunState, lineage: LineageState, cfg: PolicyConfig
) -> tuple[list[Decision], list[CallPlanned]]:
    version = lineage.latest
    if version is None:
        return [], [_generator_call(lineage.lineage, 0, lineage.index, cfg)]
    producer = state.calls[version.producer]
    if producer.status == "planned":
        return [], []
    if version.status == "unusable" or (
        version.status == "open" and version.proof_artifact is None
    ):
        why = "truncated" if producer.truncated else f"no proof ({producer.status})"
        return [_round_failed(lineage, version, why)], []
    if (
        cfg.self_improve
        and producer.role == "generator"
        and version.status == "open"
        and not verification_calls(state, lineage.lineage, version.version)
    ):
        return [], [_improve_call(lineage.lineage, version, producer)]
    if version.status == "failed":
        return _after_failure(state, lineage, version, cfg)
    return _verify_round(state, lineage, version, cfg)


def _round_failed(lineage: LineageState, version: VersionState, why: str) -> Decision:
    return Decision(
        kind="round_failed", lineage=lineage.lineage, version=version.version, reason=why
    )


def _after_failure(
    state: RunState, lineage: LineageState, version: VersionState, cfg: PolicyConfig
) -> tuple[list[Decision], list[CallPlanned]]:
    if lineage.consecutive_failures >= cfg.max_failed_rounds:
        reason = f"{lineage.consecutive_failures} consecutive failed rounds"
        return [Decision(kind="abandoned", lineage=lineage.lineage, reason=reason)], []
    next_version = version.version + 1
    pool = _pool(state, cfg, abandoned_only=False) if cfg.refine_from_pool else []
    if pool:
        version = pool[0]
    elif cfg.best_version:
        version = best_version(state, lineage, cfg) or version
    findings = confirmed_findings(state, version.lineage, version.version)
    if version.proof_artifact is not None and findings:
        # a version of another lineage is named with its lineage, as a restart's source is
        own = version.lineage == lineage.lineage
        return [], [
            CallPlanned(
                call_id=f"{lineage.lineage}.v{next_version}.revise",
                role="reviser",
                variant=_reviser_variant(cfg),
                phase="solve",
                lineage=lineage.lineage,
                version=next_version,
                target=str(version.version) if own else f"{version.lineage}.v{version.version}",
            )
        ]
    return [], [_generator_call(lineage.lineage, next_version, lineage.index, cfg)]


def _reviser_variant(cfg: PolicyConfig) -> str:
    """The reviser is told whether a reviewer confirmed its findings."""
    return "standard" if cfg.review else UNREVIEWED


def _needs_review(call: CallState, cfg: PolicyConfig) -> bool:
    findings = findings_of(call)
    if not cfg.review or not findings or call.status != "completed":
        return False
    return cfg.review_minor_on_pass or failing_report(call)


def verification_outcome(state: RunState, call: CallState, cfg: PolicyConfig) -> str:
    """pending | pass | fail | void. Void is no verdict (failed, cancelled, cut off, no
    readable verdict) when such calls are issued again, and, when an overturned fail does not
    pass, a fail whose every finding was rejected on review."""
    no_verdict = "void" if cfg.reverify_no_verdict else "fail"
    if call.status == "planned":
        return "pending"
    if call.status == "cancelled":
        return "void"  # stopped by the policy (its round was judged) or by the run's end
    if call.status != "completed" or call.truncated or not call.parsed_ok:
        return no_verdict
    findings = findings_of(call)
    review = state.calls.get(f"{call.call_id}.review")
    if _needs_review(call, cfg):
        if review is None or review.status == "planned":
            return "pending"
        verdicts = review_verdicts(review, findings)
    elif not cfg.review:
        verdicts = unreviewed_verdicts(call, findings)
    else:
        verdicts = None
    confirmed, severity = verdicts if verdicts is not None and findings else (set(), {})
    blocking = [
        f
        for f in findings
        if f.id in confirmed and severity.get(f.id, f.severity) in BLOCKING_SEVERITIES
    ]
    if blocking or (cfg.minor_blocks and findings):
        return "fail"
    if verdict_of(call) == "pass":
        return "pass"
    if findings and not confirmed:
        # A "fail" verdict whose every finding was rejected on review.
        return "pass" if cfg.overturned_fail_passes else "void"
    return "fail"


def pass_rate(state: RunState, lineage: str, version: int, cfg: PolicyConfig) -> float | None:
    """Passing share of a version's verifications with a verdict; None before any."""
    outcomes = [
        verification_outcome(state, c, cfg) for c in verification_calls(state, lineage, version)
    ]
    judged = [o for o in outcomes if o in ("pass", "fail")]
    return sum(1 for o in judged if o == "pass") / len(judged) if judged else None


def best_version(state: RunState, lineage: LineageState, cfg: PolicyConfig) -> VersionState | None:
    """The version with a proof and the highest pass rate (the latest among equals)."""
    rated = [
        (pass_rate(state, lineage.lineage, v.version, cfg), v.version, v)
        for v in lineage.versions.values()
        if v.proof_artifact is not None and v.status in ("failed", "accepted", "open")
    ]
    rated = [r for r in rated if r[0] is not None]
    if not rated:
        return None
    return max(rated, key=lambda r: (r[0], r[1]))[2]


def _unneeded_verifications(state: RunState, lineage: str, version: VersionState) -> list[str]:
    """Verifications of a version whose round was just judged that are still running."""
    return [
        c.call_id
        for c in verification_calls(state, lineage, version.version)
        if c.status == "planned"
    ]


def _reviews_due(
    state: RunState, name: str, number: int, verifications: list[CallState], cfg: PolicyConfig
) -> list[CallPlanned]:
    """A review for each of these verifications that needs one and has none yet."""
    reviewed = {c.target for c in review_calls(state, name, number)}
    return [
        CallPlanned(
            call_id=f"{v.call_id}.review",
            role="reviewer",
            variant=cfg.variant("reviewer", 0),
            phase="solve",
            lineage=name,
            version=number,
            target=v.call_id,
        )
        for v in verifications
        if _needs_review(v, cfg) and v.call_id not in reviewed
    ]


def _verify_round(
    state: RunState, lineage: LineageState, version: VersionState, cfg: PolicyConfig
) -> tuple[list[Decision], list[CallPlanned]]:
    name, number = lineage.lineage, version.version
    verifications = sorted(verification_calls(state, name, number), key=call_ordinal)
    outcomes = {c.call_id: verification_outcome(state, c, cfg) for c in verifications}
    passes = sum(1 for o in outcomes.values() if o == "pass")
    fails = sum(1 for o in outcomes.values() if o == "fail")
    pending = [c for c in verifications if outcomes[c.call_id] == "pending"]
    if fails and cfg.cancel_on_blocking:
        # The round has failed: judge it now (the engine cancels what still runs), once the
        # reviews in flight have said which findings the reviser gets.
        reviewing = [c for c in review_calls(state, name, number) if c.status == "planned"]
        if not reviewing:
            return _judge_round(state, lineage, version, passes, passes + fails, cfg), []
    reviews = _reviews_due(state, name, number, verifications, cfg)
    if reviews and not any(c.status == "planned" for c in verifications):
        return [], reviews
    if reviews and (cfg.cancel_on_blocking or cfg.verify_stage):
        return [], reviews  # staged or cancelling: review each report as soon as it is in
    k = cfg.verifications
    stage = min(cfg.verify_stage or k, k)
    wanted = stage if passes < stage else k
    if fails:
        wanted = 0 if cfg.verify_stage or cfg.cancel_on_blocking else k
    cap = (cfg.max_verifications or 2 * k) if cfg.reverify_no_verdict else k
    room = cap - len(verifications)
    ask = min(wanted - passes - fails - len(pending), room)
    if ask > 0:
        return [], _verifier_calls(name, number, "verify", len(verifications), ask, cfg)
    if pending:
        return [], []
    return _judge_round(state, lineage, version, passes, passes + fails, cfg), []


def _judge_round(
    state: RunState,
    lineage: LineageState,
    version: VersionState,
    passed: int,
    judged: int,
    cfg: PolicyConfig,
) -> list[Decision]:
    if passed >= cfg.verifications and passed == judged:
        reason = f"{passed}/{judged} verifications passed"
        return [
            Decision(
                kind="accepted", lineage=lineage.lineage, version=version.version, reason=reason
            )
        ]
    why = f"{passed}/{judged} verifications passed"
    if judged < cfg.verifications and passed == judged:
        why += f" ({cfg.verifications} needed; the others gave no verdict)"
    decisions = [_round_failed(lineage, version, why)]
    if cfg.abandon_on_recurring and _recurred(state, lineage, version, cfg):
        decisions.append(
            Decision(
                kind="abandoned",
                lineage=lineage.lineage,
                reason="a confirmed finding recurred after revision",
            )
        )
    return decisions


def _blocking_keys(state: RunState, lineage: str, version: int, paired: bool) -> set[str]:
    keys: set[str] = set()
    for finding in confirmed_findings(state, lineage, version):
        if finding.severity in BLOCKING_SEVERITIES:
            if paired:
                # location and explanation together: the same flaw, not a shared phrase
                keys.add(f"{finding.location}|{finding.explanation}".casefold())
            else:
                keys |= finding_keys(finding)
    return keys


def _recurred(
    state: RunState, lineage: LineageState, version: VersionState, cfg: PolicyConfig
) -> bool:
    if cfg.recurrence_rounds <= 1:
        # any key of this round's confirmed findings seen in an earlier round of the lineage
        return bool(
            _blocking_keys(state, lineage.lineage, version.version, False) & lineage.confirmed_keys
        )
    # the same flaw confirmed in this round and in each of the rounds before it along the
    # chain of revisions (the reviser was asked to fix it each time)
    keys = _blocking_keys(state, lineage.lineage, version.version, True)
    current: VersionState | None = version
    for _ in range(cfg.recurrence_rounds):
        parent = current.parent if current is not None else None
        if parent is None or not keys:
            return False
        current = lineage.versions.get(parent)
        if current is None:
            return False
        keys &= _blocking_keys(state, lineage.lineage, current.version, True)
    return bool(keys)


# ---------------------------------------------------------------- later checks of accepted proofs

# Issue 19 point 4. An accepted version gets, in this order, the checks that are due:
# - "final": a last round of ``final_verifications`` verifications (the run stops only on
#   proofs that passed it);
# - "recheck": when accepted proofs state different final answers (at most one of them can be
#   right), each of them another round, of ``final_verifications`` (else K) verifications.
# A check passes when every one of its verifications with a verdict passes and there are as
# many verdicts as the round's size; a proof that fails a check is no longer accepted
# (``unaccepted``: a failed round of that version, after which the lineage revises from its
# best version). A proof whose due check has not passed when the solve phase ends is
# unaccepted too: it was not accepted under the settings the run was given.
FINAL, RECHECK = "final", "recheck"


def _agreeing(
    state: RunState, done: list[LineageState]
) -> tuple[list[LineageState], tuple[Decision, ...]]:
    """Of the accepted lineages whose checks are done, the largest group that states one
    final answer (the earliest accepted among equal groups; proofs stating none form a group
    of their own), and a decision taking acceptance from each of the others."""
    groups = answer_groups(state, done)
    if len(groups) < 2:
        return done, ()
    key, agreed = max(groups.items(), key=lambda item: len(item[1]))
    why = f"its final answer differs from the one {len(agreed)} accepted proofs state"
    outvoted = [
        _unaccepted(lineage, accepted_of(lineage), why)
        for other, lineages in groups.items()
        if other != key
        for lineage in lineages
    ]
    return agreed, tuple(outvoted)


def _due_check(
    state: RunState, lineage: LineageState, cfg: PolicyConfig, disputed: set[tuple[str, int]]
) -> str | None:
    assert lineage.accepted_version is not None
    version = lineage.versions[lineage.accepted_version]
    if cfg.final_verifications and FINAL not in version.checks:
        return FINAL
    if (lineage.lineage, version.version) in disputed and RECHECK not in version.checks:
        return RECHECK
    return None


def check_size(stage: str, cfg: PolicyConfig) -> int:
    return (
        cfg.final_verifications
        if stage == FINAL
        else (cfg.final_verifications or cfg.verifications)
    )


def _unaccepted(lineage: LineageState, version: int, reason: str) -> Decision:
    return Decision(kind="unaccepted", lineage=lineage.lineage, version=version, reason=reason)


def _unchecked(
    state: RunState, cfg: PolicyConfig, disputed: set[tuple[str, int]]
) -> tuple[Decision, ...]:
    """On leaving the solve phase: the accepted proofs whose due check has not passed."""
    out = []
    for lineage in sorted(state.accepted(), key=lambda ln: ln.index):
        stage = _due_check(state, lineage, cfg, disputed)
        if stage is not None:
            assert lineage.accepted_version is not None
            why = f"its {stage} round had not passed when the solve phase ended"
            out.append(_unaccepted(lineage, lineage.accepted_version, why))
    return tuple(out)


def _verifier_calls(
    name: str, number: int, kind: str, first: int, ask: int, cfg: PolicyConfig
) -> list[CallPlanned]:
    """Verifications ``first`` to ``first + ask - 1`` of version ``number`` of lineage
    ``name``, each with its variant; call ids ``L.vN.<kind>.<i>`` (a round's, or a check's)."""
    return [
        CallPlanned(
            call_id=f"{name}.v{number}.{kind}.{n}",
            role=VERIFIER_CHECK if kind != "verify" and cfg.checks_by_checker else "verifier",
            variant=cfg.variant("verifier", n),
            phase="solve",
            lineage=name,
            version=number,
        )
        for n in range(first, first + ask)
    ]


def _checks_step(
    state: RunState, lineage: LineageState, cfg: PolicyConfig, disputed: set[tuple[str, int]]
) -> tuple[list[Decision], list[CallPlanned], list[str]]:
    """Decisions, calls and cancellations for an accepted lineage's due check."""
    stage = _due_check(state, lineage, cfg, disputed)
    if stage is None:
        return [], [], []
    assert lineage.accepted_version is not None
    name, number = lineage.lineage, lineage.accepted_version
    size = check_size(stage, cfg)
    calls = check_calls(state, name, number, stage)
    outcomes = [verification_outcome(state, c, cfg) for c in calls]
    passes, fails = outcomes.count("pass"), outcomes.count("fail")
    pending = outcomes.count("pending")
    reviews = _reviews_due(state, name, number, calls, cfg)
    if reviews:
        return [], reviews, []
    why = f"{stage} round: {passes}/{passes + fails} verifications passed"
    if fails and cfg.cancel_on_blocking:
        # Failed: judge it once the reviews in flight have said which findings stand (the
        # reviser is shown them), and stop the verifications still running.
        if any(review_running(state, c) for c in calls):
            return [], [], []
        running = [c.call_id for c in calls if c.status == "planned"]
        return [_unaccepted(lineage, number, why)], [], running
    cap = 2 * size if cfg.reverify_no_verdict else size
    ask = min(size - passes - fails - pending, cap - len(calls))
    if ask > 0:
        return [], _verifier_calls(name, number, stage, len(calls), ask, cfg), []
    if pending:
        return [], [], []
    if passes >= size and not fails:
        kind = "final_passed" if stage == FINAL else "recheck_passed"
        return [Decision(kind=kind, lineage=name, version=number, reason=why)], [], []
    if not fails:
        why += f" ({size} needed; the others gave no verdict)"
    return [_unaccepted(lineage, number, why)], [], []


# ---------------------------------------------------------------- grade, select, evaluate


def final_versions(state: RunState, cfg: PolicyConfig | None = None) -> list[VersionState]:
    """Each lineage's candidate for submission: its accepted version, else its latest proof
    (its best one, by pass rate, with ``best_version``). Once grading has begun, the versions
    it graded: the choice is then read from the journal, so the audit can re-derive what the
    selector was shown without knowing the policy's settings."""
    graded = graded_versions(state)
    return graded or candidate_finals(state, cfg)


def candidate_finals(state: RunState, cfg: PolicyConfig | None = None) -> list[VersionState]:
    """Each lineage's candidate for submission, from the lineages themselves (what grading
    starts from: they do not change once the search is over)."""
    finals: list[VersionState] = []
    for lineage in sorted(state.lineages.values(), key=lambda ln: ln.index):
        if lineage.accepted_version is not None:
            finals.append(lineage.versions[lineage.accepted_version])
            continue
        best = best_version(state, lineage, cfg) if cfg is not None and cfg.best_version else None
        with_proof = [v for v in lineage.versions.values() if v.proof_artifact is not None]
        if best is not None:
            finals.append(best)
        elif with_proof:
            finals.append(max(with_proof, key=lambda v: v.version))
    return finals


def _grade(state: RunState, cfg: PolicyConfig) -> Step:
    # From the lineages, not from the grades so far: the engine starts no more calls than
    # its concurrency allows, and a call it has not started is not yet in the journal.
    finals = candidate_finals(state, cfg)
    if not finals:
        return Step(finish=_finish(state, None, "no complete proof was produced"))
    # With a proof accepted, the submission is one of the accepted proofs, so only they are
    # graded (once: a grade is then a tie-break) and a grade of any other would be decode
    # spent on nothing. With none accepted, every final proof is graded, several times with
    # final_grades (their median ranks it): a grade then decides what is submitted.
    accepted = [v for v in finals if v.status == "accepted"]
    if accepted:
        finals, grades = accepted, 1
    else:
        grades = cfg.final_grades
    wanted = [(v, grade_call_id(v, n)) for v in finals for n in range(grades)]
    missing = [
        CallPlanned(
            call_id=call_id,
            role="grader",
            variant=cfg.variant("grader", 0),
            phase="grade",
            lineage=v.lineage,
            version=v.version,
        )
        for v, call_id in wanted
        if call_id not in state.calls
    ]
    if missing:
        return Step(calls=tuple(missing))
    if any(state.calls[call_id].status == "planned" for _, call_id in wanted):
        return Step()
    return Step(decisions=(Decision(kind="phase", phase="select", reason="graded"),))


def grades_of(state: RunState, version: VersionState) -> list[int | None]:
    """Each grade call's grade of a version, in order (None: that grader gave none)."""
    found = []
    for n in range(MAX_GRADES):
        call = state.calls.get(grade_call_id(version, n))
        if call is None:
            break
        found.append(graded_score(call))
    return found


MAX_GRADES = 15  # acceptance.final_grades' bound


def grade_of(state: RunState, version: VersionState) -> int | None:
    """A version's grade: the (lower) median of the grades it was given; None with none."""
    given = sorted(g for g in grades_of(state, version) if g is not None)
    return given[(len(given) - 1) // 2] if given else None


def _rank(state: RunState, version: VersionState) -> int:
    grade = grade_of(state, version)
    return -1 if grade is None else grade  # an ungraded proof ranks below a graded 0


def selection_pool(state: RunState) -> list[VersionState]:
    finals = final_versions(state)
    accepted = [v for v in finals if v.status == "accepted"]
    if accepted:
        return accepted
    best = max((_rank(state, v) for v in finals), default=0)
    return [v for v in finals if _rank(state, v) == best]


def _select(state: RunState, cfg: PolicyConfig) -> Step:
    if state.selected is not None:
        phase = "evaluate" if cfg.evaluation else "finished"
        if phase == "finished":
            return Step(finish=_finish(state, state.selected, state.selection_reason))
        return Step(decisions=(Decision(kind="phase", phase="evaluate", reason="selected"),))
    if cfg.pairwise_selection:
        return _bracket(state, cfg)
    pool = selection_pool(state)
    if len(pool) == 1:
        only = pool[0]
        return Step(decisions=(_selected(only.lineage, only.version, "only candidate"),))
    call = state.calls.get("select")
    if call is None:
        return Step(
            calls=(
                CallPlanned(
                    call_id="select",
                    role="selector",
                    variant=cfg.variant("selector", 0),
                    phase="select",
                ),
            )
        )
    if call.status == "planned":
        return Step()
    facts = call.facts
    usable = call.status == "completed" and call.parsed_ok
    if usable and isinstance(facts, SelectionFacts) and facts.choice is not None:
        lineage, version = facts.choice
        return Step(decisions=(_selected(lineage, version, "selector's choice"),))
    best = max(pool, key=lambda v: rank_key(state, v, cfg))
    reason = "selector gave no usable choice; the best by pass rate and grade"
    return Step(decisions=(_selected(best.lineage, best.version, reason),))


# ---------------------------------------------------------------- pairwise selection

# Issue 19 point 9. With ``pairwise_selection`` no selector call sees more than two proofs:
# - the pool is the accepted final proofs; with none accepted, the final proofs that share
#   the best rank (pass rate, then median grade); one proof in the pool is selected as it is;
# - a single-elimination bracket, seeded by rank: in each round the best-ranked entrant gets a
#   bye when the count is odd, and the others meet best against worst;
# - a match is two selector calls (variant "pairwise"), the two proofs as A and B in one and
#   swapped in the other (``select.<round>.<match>.ab`` / ``.ba``; the target names the
#   proofs in the order shown, "L0.v3,L2.v1"). A proof wins only when both orders choose it.
#   Orders that disagree (the choice followed the position, not the proof) or a call with no
#   usable choice are a tie, and a tie goes to the better-ranked proof, so a failing selector
#   falls back to the rank rule, never to a fixed lineage.


def rank_key(
    state: RunState, version: VersionState, cfg: PolicyConfig
) -> tuple[float, int, int, int]:
    """Better first when sorted in reverse: pass rate (none yet counts as 0), median grade,
    verifications passed, then the earlier lineage."""
    name, number = version.lineage, version.version
    outcomes = [
        verification_outcome(state, c, cfg) for c in verification_calls(state, name, number)
    ]
    rate = pass_rate(state, name, number, cfg) or 0.0
    grade = grade_of(state, version)
    return (
        rate,
        -1 if grade is None else grade,
        outcomes.count("pass"),
        -lineage_index(state, version),
    )


def pairwise_pool(state: RunState, cfg: PolicyConfig) -> list[VersionState]:
    """The proofs the bracket chooses among, best-ranked first."""
    ranked = sorted(final_versions(state), key=lambda v: rank_key(state, v, cfg), reverse=True)
    accepted = [v for v in ranked if v.status == "accepted"]
    if accepted or not ranked:
        return accepted
    top = rank_key(state, ranked[0], cfg)[:2]
    return [v for v in ranked if rank_key(state, v, cfg)[:2] == top]


def _bracket(state: RunState, cfg: PolicyConfig) -> Step:
    pool = pairwise_pool(state, cfg)
    if not pool:
        return Step(finish=_finish(state, None, "no complete proof was produced"))
    if len(pool) == 1:
        only = pool[0]
        why = "only candidate" if only.status == "accepted" else "the best by pass rate and grade"
        return Step(decisions=(_selected(only.lineage, only.version, why),))
    entrants, rnd, matches, ties = pool, 1, 0, 0
    while len(entrants) > 1:
        byes = entrants[:1] if len(entrants) % 2 else []
        rest = entrants[len(byes) :]
        pairs = [(rest[i], rest[-1 - i]) for i in range(len(rest) // 2)]
        ids = [(f"select.{rnd}.{m}.ab", f"select.{rnd}.{m}.ba") for m in range(len(pairs))]
        missing = [
            CallPlanned(
                call_id=call_id,
                role="selector",
                variant="pairwise",
                phase="select",
                target=pair_target(a, b),
            )
            for (x, y), (ab, ba) in zip(pairs, ids, strict=True)
            for call_id, a, b in ((ab, x, y), (ba, y, x))
            if call_id not in state.calls
        ]
        if missing:
            return Step(calls=tuple(missing))
        if any(state.calls[c].status == "planned" for pair in ids for c in pair):
            return Step()
        winners = list(byes)
        for (x, y), (ab, ba) in zip(pairs, ids, strict=True):
            first, second = picked(state, ab), picked(state, ba)
            matches += 1
            if first is not None and first == second:
                winners.append(x if first == (x.lineage, x.version) else y)
            else:
                ties += 1
                winners.append(x)  # the better-ranked of the two
        entrants = sorted(winners, key=lambda v: rank_key(state, v, cfg), reverse=True)
        rnd += 1
    won = entrants[0]
    reason = f"won a pairwise bracket of {len(pool)} ({matches} matches, {ties} settled by rank)"
    return Step(decisions=(_selected(won.lineage, won.version, reason),))


def _selected(lineage: str, version: int, reason: str) -> Decision:
    return Decision(kind="selected", lineage=lineage, version=version, reason=reason)


def _evaluate(state: RunState, cfg: PolicyConfig) -> Step:
    assert state.selected is not None
    rules = cfg.evaluation_rules
    checks, checking = _given_checks(state, cfg)
    comparisons, comparing = _given_selections(state)
    checks += comparisons
    checking = checking or comparing
    calls = evaluation_step(state, rules)
    if calls is None and not checks and not checking:
        finish = _finish(state, state.selected, state.selection_reason)
        summary = evaluation_summary(state, rules)
        return Step(finish=RunEnd(finish.outcome, finish.selected, finish.reason, summary))
    return Step(calls=(*checks, *(calls or ())))


def _given_checks(state: RunState, cfg: PolicyConfig) -> tuple[list[CallPlanned], bool]:
    """The verifications of a given proof still to start (``given_verifications`` by each
    verifier variant, in the variants' turn), the reviews those that ended need (as the
    solve phase would review them), and whether any started is still running. They judge
    nothing: a calibration reads their verdicts and reviews against the humans' grades."""
    lineage = state.lineages.get(GIVEN)
    if not cfg.given_verifications or lineage is None:
        return [], False
    variants = cfg.variants.get("verifier") or ("default",)
    started = [c for c in state.calls.values() if c.lineage == GIVEN and c.role == "verifier"]
    wanted = cfg.given_verifications * len(variants)
    planned = _verifier_calls(GIVEN, 0, "verify", len(started), wanted - len(started), cfg)
    reviews = _reviews_due(state, GIVEN, 0, started, cfg)
    checks = [c.model_copy(update={"phase": "evaluate"}) for c in (*planned, *reviews)]
    reviewing = review_calls(state, GIVEN, 0)
    return checks, any(c.status == "planned" for c in (*started, *reviewing))


def _given_selections(state: RunState) -> tuple[list[CallPlanned], bool]:
    """The comparisons of a given proof with its rivals still to start, and whether any
    started is still running. They choose nothing: a calibration reads their choices against
    the humans' grades."""
    compared = given_comparisons(state)
    calls = [
        CallPlanned(
            call_id=call_id,
            role="selector",
            variant="pairwise",
            phase="evaluate",
            target=target,
        )
        for call_id, target, _ in compared
        if call_id not in state.calls
    ]
    running = any(
        state.calls[call_id].status == "planned"
        for call_id, _, _ in compared
        if call_id in state.calls
    )
    return calls, running


def _claim_doubt(state: RunState, version: VersionState) -> str:
    """Why an accepted proof may not be claimed solved ("" when nothing stands against it):
    the accepted proofs state different final answers, so at least one of them is wrong and
    the run cannot tell which; or its own verifications left a blocking finding open (a
    critical or major finding confirmed, or unreviewed in a run without reviews)."""
    stated = {k for k in answer_groups(state, state.accepted()) if k is not None}
    if len(stated) > 1:
        return (
            "the accepted proofs state different final answers (" + ", ".join(sorted(stated)) + ")"
        )
    blocking = [
        f
        for f in confirmed_findings(state, version.lineage, version.version)
        if f.severity in BLOCKING_SEVERITIES
    ]
    if blocking:
        return f"{len(blocking)} blocking finding(s) of its verifications stand unresolved"
    return ""


def _finish(state: RunState, selected: tuple[str, int] | None, reason: str) -> RunEnd:
    if selected is not None:
        version = state.lineages[selected[0]].versions[selected[1]]
        doubt = _claim_doubt(state, version) if version.status == "accepted" else ""
        if version.status == "accepted" and not doubt:
            return RunEnd("solved", selected, reason)
        grade = grade_of(state, version)
        if doubt:
            # Accepted, but what the run found contradicts it: not claimed solved.
            reason = f"{reason}; not claimed solved: {doubt}"
            return RunEnd("unsolved" if grade == 0 else "partial", selected, reason)
        if (grade or 0) > 0:
            return RunEnd("partial", selected, reason)
        if grade is None and selected[0] != GIVEN:  # a given proof's grade is the evaluation's
            # Not a zero: nothing judged it, which the reader must not take for a verdict.
            return RunEnd("unsolved", selected, f"{reason}; no grader gave a grade")
        return RunEnd("unsolved", selected, reason)
    if state.budget_exhausted:
        # The search was stopped, not broken: an honest "unsolved", with the budget named.
        return RunEnd("unsolved", None, f"{state.budget_exhausted}; {reason}")
    if any(c.status == "completed" for c in state.calls.values()):
        return RunEnd("unsolved", None, reason)
    return RunEnd("failed", None, reason + "; no model call completed")
