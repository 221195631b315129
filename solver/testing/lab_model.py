"""The policy lab's simulated capable model: hidden proof states, answers in each role's contract.

Every proof the simulated generator or reviser writes gets a hidden state (a set of flaws, each
critical or major with its own detectability, and a true 0-7 score) and a tag in its text
(``LAB-PROOF <id>``) through which later calls recognise it. Each role then answers from those
states in its real output contract (the formats ``solver.roles`` parses):

- verifier: finds each real flaw with its detectability, raises a false alarm on a proof with a
  given rate, adds minor remarks; sometimes gives no verdict (prose only) or is cut off;
- reviewer: confirms real findings and rejects false ones with given accuracies;
- reviser: fixes each confirmed real flaw with some probability, may add a new flaw, and may
  also fix an unconfirmed one by rewriting; a wrong approach (a flaw of a fresh proof, with the
  problem's ``p_wrong``) no revision fixes: only a proof written from scratch escapes it;
- generator, second turn (self-improvement: its own proof in the conversation): fixes each
  flaw of its proof with a share of the reviser's rate (it has no confirmed findings to go
  on) and may add a flaw as any rewrite may;
- recombiner (a reviser shown 2-4 proofs with their confirmed findings): revises the proof
  with the fewest confirmed findings, may repair a remaining flaw with an idea from each other
  proof, and may carry over a flaw of another proof (the assumptions are documented in
  docs/bench-policy.md, with ranges);
- the three repairs nobody aimed at (a collateral fix, the self-improvement turn, a borrowed
  idea) reach a flaw hidden from the run's family only with ``hidden_repair`` times their
  chance: that family reads the step as sound, as its verifiers do;
- grader and selector (judges of the run's family): each flaw of a proof is seen as a verifier
  of that family sees it, with its detectability, so a flaw hidden from the verifiers is
  hidden from the judges too; a proof whose flaws a judge misses reads to it as a 7. The
  grader gives the score it reads, with noise; the selector picks the best it reads with
  some accuracy (``judges_see_truth`` 1 restores the earlier lab's judges, which read the
  true score);
- a checker of another model family (``family="other"``, the run's ``roles.checker``): a
  verifier with blind spots of its own, the problem's ``p_hidden`` times
  ``checker_blind_share`` of them, correlated with the run's family's by
  ``blind_spot_correlation``: with as many as the run's, a flaw hidden from the run's family
  is hidden from it with ``p + rho (1 - p)``, any other flaw with ``p (1 - rho)``. Those
  draws hang off the flaw's key, so the first family's session is the same draw for draw
  whether a checker exists or not;
- a thinking budget (SGLang's ``custom_params``) ends a call's reasoning at the budget, and
  the call loses work in proportion to the share it cut (``budget_cost``): a writer's proof
  may get one more flaw, a verifier may miss a flaw it would have found.

Draws come from a hash of (seed, role, request body less its thinking-budget fields, how many
identical bodies came before), so a session is a pure function of its seed and the order of
identical requests, whatever carries the bytes (in-process or HTTP), and a budgeted session
draws as the same session without a budget. Token lengths per role are log-normal; a draw
above the request's ``max_tokens`` is cut there (``finish_reason: length``), as a server would.

The parameters and their sources are in docs/bench-policy.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from solver.testing.fake_endpoint import RecordedRequest, Reply
from solver.testing.roles import role_of
from solver.wire import BUDGET_FIELDS

__all__ = ["LabModel", "ProblemParams", "ProofState", "RoleParams", "lab_role"]


@dataclass(frozen=True)
class ProblemParams:
    """One problem's difficulty, in the model's terms."""

    name: str
    p_correct: float  # a fresh proof is correct
    p_critical: float  # a flawed fresh proof has a critical flaw (else major gaps only)
    detect: float  # a verifier finds a given real flaw
    p_hidden: float  # a flaw no verifier sees (the DSM-V2 P6 case)
    fix: float  # the reviser fixes a confirmed flaw
    p_wrong: float = 0.0  # a flawed fresh proof is on a wrong approach: no revision fixes it
    partial_score: tuple[int, int] = (1, 5)  # true score range of a flawed proof
    wrong_score: tuple[int, int] = (0, 1)  # true score range of a wrong approach
    asks_answer: bool = False  # the problem asks for a short final answer, which proofs state


@dataclass(frozen=True)
class RoleParams:
    """Role behaviour shared by all problems; token lengths are (median, sigma) log-normal."""

    false_alarm: float = 0.12  # a verifier reports a blocking finding on a correct step
    minor_rate: float = 0.5  # a verifier adds a minor remark
    no_verdict: float = 0.03  # a verifier answers in prose only
    review_confirm_real: float = 0.9
    review_reject_false: float = 0.8
    revise_new_flaw: float = 0.15
    revise_collateral_fix: float = 0.2  # an unconfirmed flaw fixed by the rewrite
    grader_noise: float = 0.3  # probability the grade is off by one
    selector_accuracy: float = 0.7
    # The generator's self-improvement turn fixes a flaw with this share of the problem's fix
    # rate (0: no intrinsic self-correction; range 0 to 0.6).
    self_fix_factor: float = 0.3
    # A recombination: each other proof shown repairs a remaining flaw of the base with this
    # chance (range 0 to 0.3), and each flaw of another proof is carried over with this one
    # (range 0 to 0.3).
    recombine_borrow: float = 0.15
    recombine_inherit: float = 0.1
    # The correlation between the blind spots of the run's model family and a checker's of
    # another family: 0 independent, 1 the same (range 0 to 0.8: docs/bench-policy.md, "A
    # checker of another family"); below 0 they avoid each other, down to -p / (1 - p),
    # where no flaw is hidden from both (what tests use to isolate the checker).
    blind_spot_correlation: float = 0.5
    # The checker's blind spots as a share of the run's family's (its p_hidden is the
    # problem's times this): 1 as many, below 1 a stronger checker. A what-if, not a
    # calibrated value (docs/bench-policy.md, "A checker of another family").
    checker_blind_share: float = 1.0
    # Short final answers (a what-if: 0, the proofs state none; 1, every problem asks for
    # one). A correct proof, or one flawed in a step, states the right answer; a wrong
    # approach states a wrong one with ``wrong_answer`` (range 0.1 to 1), drawn among
    # ``wrong_answers`` equally likely values (range 1 to 3; 1: every wrong approach agrees
    # on the same wrong answer). docs/bench-policy.md, "Final answers".
    short_answers: float = 0.0
    wrong_answer: float = 0.65
    wrong_answers: float = 2.0
    # The proofs of a problem that asks for a short answer (``ProblemParams.asks_answer``)
    # state one; 0: no proof states one, as in the lab before 2026-12-02.
    answer_problems: float = 1.0
    # Judges (grader, selector) read the true score: 1 is the lab before 2026-12-02, a what-if
    # that flatters every policy that selects among proofs; 0 (the default) they see a flaw
    # only as the run's verifiers do (docs/bench-policy.md, "Parameters").
    judges_see_truth: float = 0.0
    # A repair nobody aimed at (a revision's collateral fix, the self-improvement turn, an
    # idea borrowed in a recombination) reaches a flaw hidden from the run's family with this
    # share of its chance: the family believes such a step sound, so it does not rework it.
    # 0 the default; 1 the lab before this parameter, where rewriting fixed a hidden step as
    # often as any other (range 0 to 1, in the sweep; docs/bench-policy.md, "Parameters").
    hidden_repair: float = 0.0
    # How far the blind spots of one prompt of the run's family (a verifier variant, the
    # grader, the selector) are another's: 1 a flaw hidden from one is hidden from all, as in
    # the lab before this parameter (DSM-V2's P6 passed 64 verifications, all of one prompt);
    # below 1 a flaw's blindness is shared with this chance, and otherwise each prompt draws
    # its own with the problem's p_hidden, so two prompts' blind spots correlate by this value
    # and each keeps the problem's share. Range 0 to 1, not measured (docs/bench-policy.md,
    # "Blind spots of the verifier variants").
    variant_correlation: float = 1.0
    # What a thinking budget costs: a call whose reasoning the budget cut to a share f of what
    # it would have used loses each piece of its work with ``budget_cost * (1 - f)``. A
    # writer's proof gets a further flaw with that chance (a step the cut reasoning did not
    # finish); a verifier misses each flaw it would have found with it. 0 a budget is free
    # (the lab before 2026-12-02); 1 a call cut to half its reasoning loses half its work
    # (range 0 to 1, not measured: docs/bench-policy.md, "Thinking budget"). The other
    # roles' budgets stay free, so the lab does not measure them.
    budget_cost: float = 0.5
    # A flawed fresh proof has a second flaw (a major gap) with this chance. Not measured: no
    # source counts flaws per proof, so it is swept over 0.15 to 0.55 (docs/bench-policy.md,
    # "Parameters").
    second_flaw: float = 0.35
    # The python tool (docs/bench-policy.md, "The python tool"). A verifier offered the tool
    # writes one check with ``tool_check`` (range 0.25 to 1, swept; no source counts how often
    # a verifier of this family writes one). The check refutes a flaw the verifier's reading
    # missed with ``tool_refute`` on a problem whose claim is computable (it asks for a short
    # answer: an extremal value, a final number; DSM-V2's P6 4048 falls to a brute force at
    # n = 4), and with ``tool_refute * tool_structural`` on a pure structural proof. The share
    # is a property of the flaw (one draw per flaw), swept over 0.1 to 0.6 from the P6 case
    # and the IMO 2026 archives.
    tool_check: float = 0.6
    tool_refute: float = 0.3
    tool_structural: float = 0.25
    # A tool turn's cost: the check's reasoning and code (a (median, sigma) log-normal of
    # completion tokens), the result read back (its stdout, a few dozen tokens, at prefill),
    # the conversation re-sent with its prefix cached, and the sandbox's seconds of wall time
    # (bench/sandbox.py: 48 ms start-up; 0.05 to 30 s with a real brute force).
    tool_code_tokens: tuple[int, float] = (1_500, 0.6)
    tool_seconds: float = 2.0
    lengths: dict[str, tuple[int, float]] = field(
        default_factory=lambda: {
            "generator": (30_000, 0.6),
            "reviser": (24_000, 0.6),
            "recombiner": (24_000, 0.6),
            "verifier": (12_000, 0.5),
            "reviewer": (6_000, 0.5),
            "grader": (6_000, 0.4),
            "selector": (8_000, 0.4),
            "other": (4_000, 0.4),
        }
    )
    proof_tokens: tuple[int, float] = (3_500, 0.4)  # the visible proof (DSM-V2 proofs: 6-17 kB)


@dataclass(frozen=True)
class Flaw:
    key: str
    severity: str  # critical | major
    detect: float
    fixable: bool = True  # False: a wrong approach, which only a fresh proof escapes
    detect_other: float = 0.0  # what a checker of another family finds it with
    answer: str = ""  # a wrong approach's wrong final answer ("": it states the right one)


@dataclass(frozen=True)
class ProofState:
    proof_id: str
    flaws: tuple[Flaw, ...]
    score: int
    tokens: int  # length of the visible proof, for prompts that carry it

    @property
    def correct(self) -> bool:
        return not self.flaws

    @property
    def wrong_approach(self) -> bool:
        return any(not f.fixable for f in self.flaws)

    @property
    def answer(self) -> str:
        """The final answer it states: a wrong approach's wrong one, else the right one."""
        wrong = [f.answer for f in self.flaws if f.answer]
        return wrong[0] if wrong else RIGHT_ANSWER


RIGHT_ANSWER = "7"  # the lab's short answers are numbers, so answer_key tells them apart
_WRONG_ANSWERS = ("8", "9", "10")

_TAG = re.compile(r"LAB-PROOF ([0-9a-f]{12})")
_CHECK = re.compile(r"LAB-CHECK ([0-9a-f]{16})")
_REFUTED = re.compile(r"^REFUTED ([0-9A-Za-z]+)$", re.MULTILINE)
_STEP = "Step {key}: the argument at this point is written out."


_LAB_ROLES = {"reconcile": "grader", "evaluation": "grader"}


def lab_role(request: RecordedRequest) -> str:
    """The role a request is for (``solver.testing.roles``), graders of every kind as one."""
    try:
        role = role_of(request)
    except AssertionError:
        return "other"
    return _LAB_ROLES.get(role, role)


class _Draws:
    """Uniform draws from a hash chain: deterministic per (seed, request, occurrence)."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._n = 0

    def u(self) -> float:
        self._n += 1
        digest = hashlib.sha256(self._key + self._n.to_bytes(4, "big")).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def chance(self, p: float) -> bool:
        return self.u() < p

    def lognormal(self, median: int, sigma: float) -> int:
        # Box-Muller from two draws
        u1, u2 = max(self.u(), 1e-12), self.u()
        z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
        return max(64, int(median * math.exp(sigma * z)))

    def pick(self, n: int) -> int:
        return min(int(self.u() * n), n - 1)

    def hex(self) -> str:
        return hashlib.sha256(self._key + b"id").hexdigest()[:12]

    def branch(self, name: bytes) -> _Draws:
        """A stream of its own, from this one's key: draws taken from it leave this one's as
        they were."""
        return _Draws(self._key + b"|" + name)


class LabModel:
    """A responder (``Callable[[RecordedRequest], Reply]``) for one simulated session."""

    def __init__(self, problem: ProblemParams, roles: RoleParams, seed: int) -> None:
        self.problem = problem
        self.roles = roles
        self.seed = seed
        self.proofs: dict[str, ProofState] = {}
        self.calls_by_role: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self.log: list[tuple[str, str, int]] = []  # (role, body digest, occurrence) in order
        self.verifier_views: set[str] = set()  # the verifier prompts of the run's family seen
        self._lock = threading.Lock()  # FakeEndpoint answers from its server threads
        # a verifier's report held while its check runs: (report, completion tokens), by the
        # check's tag, which the next request of the same call carries back
        self._pending: dict[str, tuple[str, int]] = {}
        self.checks_written = 0
        self.checks_refuting = 0

    # ------------------------------------------------------------ plumbing

    def _draws(self, role: str, body: bytes) -> _Draws:
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            occurrence = self._seen.get(digest, 0)
            self._seen[digest] = occurrence + 1
            self.log.append((role, digest[:12], occurrence))
            self.calls_by_role[role] = self.calls_by_role.get(role, 0) + 1
        return _Draws(f"{self.seed}|{self.problem.name}|{role}|{digest}|{occurrence}".encode())

    def proofs_in(self, text: str) -> list[ProofState]:
        found = []
        for proof_id in _TAG.findall(text):
            state = self.proofs.get(proof_id)
            if state is not None and state not in found:
                found.append(state)
        return found

    def prompt_tokens(self, request: RecordedRequest) -> int:
        """The prompt's size as the GPU sees it: the text, with each carried proof at its
        simulated length rather than the few lines that stand for it here."""
        carried = request.user_text + request.text_of_role("assistant")
        text = request.system_text + carried
        extra = sum(max(p.tokens - 60, 0) for p in self.proofs_in(carried))
        return len(text) // 4 + extra

    def family(self, name: str) -> Callable[[RecordedRequest], Reply]:
        """The responder of model family ``name`` ("own": the run's; "other": a checker's),
        over the same proofs."""
        return lambda request: self(request, family=name)

    def __call__(self, request: RecordedRequest, family: str = "own") -> Reply:
        role = lab_role(request)
        if request.tool_results:
            return self._after_check(request)
        # another family's draws are its own, and counted apart ("verifier@other")
        draws = self._draws(role if family == "own" else f"{role}@{family}", _draw_key(request))
        answer = {
            "generator": self._generate,
            "reviser": self._revise,
            "recombiner": self._recombine,
            "verifier": lambda r, d: self._verify(r, d, family),
            "reviewer": self._review,
            "grader": self._grade,
            "selector": self._select,
        }.get(role)
        text = answer(request, draws) if answer is not None else "No answer."
        median, sigma = self.roles.lengths.get(role, self.roles.lengths["other"])
        completion = draws.lognormal(median, sigma)
        limit = int(request.json.get("max_tokens") or request.json.get("max_output_tokens") or 0)
        finish = "stop"
        written: list[ProofState] = []
        budgeted: int | None = None
        answer_tokens = 0
        if "custom_params" in request.json:  # only a budgeted call needs its answer's length
            written = self.proofs_in(text) if role in _WRITERS else []
            answer_tokens = _answer_tokens(written, completion)
            budgeted = _thinking_budgeted(request.json, completion, answer_tokens, limit)
        if budgeted is not None:
            # the share of the reasoning the budget cut away
            cut = 1.0 - (budgeted - answer_tokens) / (completion - answer_tokens)
            rushed = self._rushed(request, role, written, draws.branch(b"budget"), family, cut)
            text = rushed or text
            completion = budgeted
        elif limit and completion > limit:
            completion, finish = limit, "length"
            text = text[: max(len(text) // 3, 1)]  # cut mid-answer: no closing sections
        reasoning = "Thinking about the problem."
        if role == "verifier" and finish == "stop" and self._offered(request):
            check = self._check(request, draws.branch(b"tool"), text, completion)
            if check is not None:
                return check
        return Reply(
            text=text,
            reasoning=reasoning,
            finish_reason=finish,
            usage=(self.prompt_tokens(request), completion),
            chunk_chars=4096,
        )

    # ------------------------------------------------------------ the python tool

    @staticmethod
    def _offered(request: RecordedRequest) -> bool:
        return "python" in request.offered_tools and request.tool_choice != "none"

    def refutable(self, flaw: Flaw) -> bool:
        """Whether a computation can refute ``flaw``: one draw per flaw (its own stream, so
        the session's other draws stay as they were), with ``tool_refute`` on a problem whose
        claim is computable and ``tool_refute * tool_structural`` on a structural one."""
        share = self.roles.tool_refute
        if not self.problem.asks_answer:
            share *= self.roles.tool_structural
        draws = _Draws(f"{self.seed}|{self.problem.name}|refute|{flaw.key}".encode())
        return draws.chance(share)

    def _check(
        self, request: RecordedRequest, draws: _Draws, report: str, completion: int
    ) -> Reply | None:
        """With ``tool_check``, the verifier writes a check before it answers: a real,
        deterministic program that prints ``REFUTED <step>`` for each flaw of the proof its
        reading missed and a computation refutes, else ``CONSISTENT``. Its report waits for
        the result (``_after_check``)."""
        found = self.proofs_in(request.user_text)
        if not found or not draws.chance(self.roles.tool_check):
            return None
        refuted = [
            flaw.key
            for flaw in found[0].flaws
            if _STEP.format(key=flaw.key) not in report and self.refutable(flaw)
        ]
        tag = hashlib.sha256(draws.hex().encode() + request.body).hexdigest()[:16]
        code = (
            f"# LAB-CHECK {tag}\n"
            "# the claim tested at small cases, as the simulated verifier wrote the test\n"
            f"refuted = {refuted!r}\n"
            'print("\\n".join(f"REFUTED {step}" for step in refuted) or "CONSISTENT")\n'
        )
        with self._lock:
            self._pending[tag] = (report, completion)
            self.checks_written += 1
            self.checks_refuting += bool(refuted)
        median, sigma = self.roles.tool_code_tokens
        return Reply(
            text="I will test the claim on small cases first.",
            reasoning="Thinking about a check.",
            tool_calls=[(f"call_{tag}", "python", json.dumps({"code": code}))],
            finish_reason="tool_calls",
            usage=(self.prompt_tokens(request), draws.lognormal(median, sigma)),
            chunk_chars=4096,
        )

    def _after_check(self, request: RecordedRequest) -> Reply:
        """The verifier reads its check's result: each step the program refuted becomes a
        finding (with the flaw's severity) on top of the report it had drawn. The prompt is
        the conversation re-sent, its prefix cached."""
        tags = _CHECK.findall(request.body.decode("utf-8", "replace"))
        with self._lock:
            held = self._pending.get(tags[-1]) if tags else None
        if held is None:
            return Reply(text="No answer.", usage=(self.prompt_tokens(request), 16))
        report, completion = held
        try:
            stdout = str(json.loads(request.tool_results[-1]).get("stdout", ""))
        except (ValueError, AttributeError):
            stdout = ""
        found = self.proofs_in(request.user_text)
        severity = {f.key: f.severity for f in found[0].flaws} if found else {}
        refuted = [key for key in _REFUTED.findall(stdout) if key in severity]
        text = report
        if refuted and "```json" in report:
            head, block = report.split("```json\n", 1)
            payload = json.loads(block.split("\n```", 1)[0])
            for key in refuted:
                payload["findings"].append(
                    {
                        "id": f"F{len(payload['findings']) + 1}",
                        "location": _STEP.format(key=key),
                        "severity": severity[key],
                        "explanation": f"A computation at small cases contradicts step {key}.",
                    }
                )
            payload["verdict"] = "fail"
            text = f"{head}```json\n{json.dumps(payload)}\n```"
        prompt = self.prompt_tokens(request)
        return Reply(
            text=text,
            reasoning="Reading the result.",
            usage=(prompt, completion),
            cached_tokens=max(prompt - 64, 0),
            chunk_chars=4096,
        )

    def _rushed(
        self,
        request: RecordedRequest,
        role: str,
        written: list[ProofState],
        draws: _Draws,
        family: str,
        cut: float,
    ) -> str | None:
        """The answer of a call whose thinking budget cut away the share ``cut`` of its
        reasoning (``budget_cost``; ``written``: the proof a writer's answer carries), or
        None where the cut costs it nothing. Its draws are a branch of the call's own, so a
        session without a budget is the same draw for draw."""
        loss = min(max(self.roles.budget_cost * cut, 0.0), 1.0)
        if loss <= 0.0:
            return None
        if role == "verifier":
            return self._verify(request, draws, family, keep=1.0 - loss)
        if not written or not draws.chance(loss):
            return None
        proof = written[0]
        return self._proof_text(self._new_proof(draws, (*proof.flaws, self._flaw(draws, "major"))))

    # ------------------------------------------------------------ proofs

    def _new_proof(self, draws: _Draws, flaws: tuple[Flaw, ...]) -> ProofState:
        low, high = self.problem.partial_score
        if not flaws:
            score = 7
        elif any(not f.fixable for f in flaws):
            low, high = self.problem.wrong_score
            score = low + draws.pick(high - low + 1)
        elif any(f.severity == "critical" for f in flaws):
            score = low + draws.pick(max(high - low, 1) // 2 + 1)
        else:
            score = low + draws.pick(high - low + 1)
        tokens = draws.lognormal(*self.roles.proof_tokens)
        state = ProofState(proof_id=draws.hex(), flaws=flaws, score=score, tokens=tokens)
        with self._lock:
            self.proofs[state.proof_id] = state
        return state

    def _flaw(self, draws: _Draws, severity: str, fixable: bool = True) -> Flaw:
        detect = 0.0 if draws.chance(self.problem.p_hidden) else self.problem.detect
        key = draws.hex()[:6] + str(draws.pick(10_000))
        # the other family's view, from draws of its own (the first family's stay as they were)
        other = _Draws(f"{self.seed}|{self.problem.name}|other|{key}".encode())
        hidden = other.chance(self._checker_blind(detect == 0.0))
        detect_other = 0.0 if hidden else self.problem.detect
        return Flaw(
            key=key,
            severity=severity,
            detect=detect,
            fixable=fixable,
            detect_other=detect_other,
            answer="" if fixable else self._wrong_answer(key),
        )

    def _wrong_answer(self, key: str) -> str:
        """The final answer a wrong approach states, drawn from the flaw's key (so revisions
        that keep the approach keep its answer): "" for the right one."""
        draws = _Draws(f"{self.seed}|{self.problem.name}|answer|{key}".encode())
        if not draws.chance(self.roles.wrong_answer):
            return ""
        values = min(max(round(self.roles.wrong_answers), 1), len(_WRONG_ANSWERS))
        return _WRONG_ANSWERS[draws.pick(values)]

    def _checker_blind(self, hidden_from_run: bool) -> float:
        """The chance a flaw is hidden from the checker, given whether it is hidden from the
        run's family: two yes-or-no indicators with means ``p`` (the problem's ``p_hidden``)
        and ``q`` (``p`` times ``checker_blind_share``) and correlation rho."""
        p = self.problem.p_hidden
        q = min(max(p * self.roles.checker_blind_share, 0.0), 1.0)
        if not 0.0 < p < 1.0:
            return q
        both = p * q + self.roles.blind_spot_correlation * math.sqrt(p * (1 - p) * q * (1 - q))
        chance = both / p if hidden_from_run else (q - both) / (1 - p)
        return min(max(chance, 0.0), 1.0)

    def _fresh_flaws(self, draws: _Draws) -> tuple[Flaw, ...]:
        if draws.chance(self.problem.p_correct):
            return ()
        if draws.chance(self.problem.p_wrong):
            # The approach itself fails: a critical flaw that revising the steps cannot remove.
            flaws = [self._flaw(draws, "critical", fixable=False)]
        else:
            severity = "critical" if draws.chance(self.problem.p_critical) else "major"
            flaws = [self._flaw(draws, severity)]
        if draws.chance(self.roles.second_flaw):
            flaws.append(self._flaw(draws, "major"))
        return tuple(flaws)

    def _proof_text(self, state: ProofState) -> str:
        steps = [_STEP.format(key=f"S{i}") for i in range(3)]
        steps += [_STEP.format(key=f.key) for f in state.flaws]
        body = "\n\n".join([f"LAB-PROOF {state.proof_id}", *steps, "This completes the proof."])
        answer = state.answer if self._states_answer() else "See the proof."
        return (
            f"## Proof\n\n{body}\n\n## Final answer\n\n{answer}\n\n"
            "## Self-assessment\n\nStatus: complete."
        )

    def _states_answer(self) -> bool:
        if self.roles.short_answers >= 0.5:
            return True
        return self.problem.asks_answer and self.roles.answer_problems >= 0.5

    def _generate(self, request: RecordedRequest, draws: _Draws) -> str:
        own = self.proofs_in(request.text_of_role("assistant"))
        if own:
            return self._improve(own[0], draws)
        return self._proof_text(self._new_proof(draws, self._fresh_flaws(draws)))

    def _improve(self, first: ProofState, draws: _Draws) -> str:
        """The self-improvement turn: the generator checks its own proof, with no findings."""
        rate = self.problem.fix * self.roles.self_fix_factor
        kept = [
            flaw
            for flaw in first.flaws
            if not (flaw.fixable and draws.chance(rate * self._unaimed(flaw)))
        ]
        if draws.chance(self.roles.revise_new_flaw):
            kept.append(self._flaw(draws, "major"))
        return self._proof_text(self._new_proof(draws, tuple(kept)))

    def _recombine(self, request: RecordedRequest, draws: _Draws) -> str:
        """A new proof from 2-4 shown ones: the one with the fewest confirmed findings is
        revised; each other shown proof may lend the idea that repairs a remaining flaw
        (``recombine_borrow``) and may pass on one of its own (``recombine_inherit``)."""
        shown: list[tuple[ProofState, str]] = []
        for block in request.user_text.split("\n## Attempt ")[1:]:
            found = self.proofs_in(block)
            if found:
                shown.append((found[0], block.split("### Confirmed findings", 1)[-1]))
        if not shown:
            return self._proof_text(self._new_proof(draws, self._fresh_flaws(draws)))
        base, findings = min(shown, key=lambda item: item[1].count("### Finding C"))
        others = [state for state, _ in shown if state is not base]
        kept: list[Flaw] = []
        for flaw in base.flaws:
            # a recombination revises its base proof, so the base's wrong approach stays
            if flaw.fixable and draws.chance(self._fix_chance(flaw, findings)):
                continue
            borrow = self.roles.recombine_borrow * self._unaimed(flaw)
            if flaw.fixable and any(draws.chance(borrow) for _ in others):
                continue
            kept.append(flaw)
        for other in others:
            kept += [f for f in other.flaws if draws.chance(self.roles.recombine_inherit)]
        if draws.chance(self.roles.revise_new_flaw):
            kept.append(self._flaw(draws, "major"))
        return self._proof_text(self._new_proof(draws, tuple(kept)))

    def _revise(self, request: RecordedRequest, draws: _Draws) -> str:
        found = self.proofs_in(request.user_text)
        if not found:
            return self._generate(request, draws)
        old = found[0]
        findings = _findings_section(request.user_text)
        kept: list[Flaw] = []
        for flaw in old.flaws:
            fixed = flaw.fixable and draws.chance(self._fix_chance(flaw, findings))
            if not fixed:
                kept.append(flaw)
        if draws.chance(self.roles.revise_new_flaw):
            kept.append(self._flaw(draws, "major"))
        return self._proof_text(self._new_proof(draws, tuple(kept)))

    def _fix_chance(self, flaw: Flaw, findings: str) -> float:
        """A revision's chance to fix ``flaw``: the problem's fix rate when ``findings`` (the
        confirmed ones shown to it) name the flaw, else the chance of a collateral fix."""
        if f"Step {flaw.key}:" in findings:
            return self.problem.fix
        return self.roles.revise_collateral_fix * self._unaimed(flaw)

    def _detect(self, flaw: Flaw, view: str) -> float:
        """What the prompt ``view`` of the run's family finds ``flaw`` with: the flaw's own
        draw when blind spots are shared (always, at ``variant_correlation`` 1), else one of
        the prompt's own, from a stream keyed on the flaw and the prompt (the session's other
        draws stay as they were)."""
        if self.roles.variant_correlation >= 1.0:
            return flaw.detect
        draws = _Draws(f"{self.seed}|{self.problem.name}|view|{flaw.key}".encode())
        if draws.chance(self.roles.variant_correlation):
            return flaw.detect
        own = draws.branch(view.encode())
        return 0.0 if own.chance(self.problem.p_hidden) else self.problem.detect

    def hidden(self, proof: ProofState) -> bool:
        """Flawed, and no verifier prompt the run used can find any of its flaws."""
        views = sorted(self.verifier_views) or [""]
        return bool(proof.flaws) and all(
            self._detect(flaw, view) == 0.0 for flaw in proof.flaws for view in views
        )

    def _unaimed(self, flaw: Flaw) -> float:
        """The share of an unaimed repair's chance that reaches ``flaw``: all of it for a flaw
        the run's family can see, ``hidden_repair`` for one it cannot."""
        return 1.0 if flaw.detect > 0.0 else self.roles.hidden_repair

    # ------------------------------------------------------------ judging

    def _verify(
        self, request: RecordedRequest, draws: _Draws, family: str = "own", keep: float = 1.0
    ) -> str:
        """A verifier's report; ``keep`` scales the chance of finding each flaw (a verifier
        whose thinking budget cut its reasoning short)."""
        found = self.proofs_in(request.user_text)
        if not found:
            return "The text contains no proof."
        proof = found[0]
        view = _view_of(request)
        if family == "own":
            with self._lock:
                self.verifier_views.add(view)
        findings: list[dict[str, str]] = []
        for flaw in proof.flaws:
            if draws.chance(
                keep * (self._detect(flaw, view) if family == "own" else flaw.detect_other)
            ):
                findings.append(
                    {
                        "id": f"F{len(findings) + 1}",
                        "location": _STEP.format(key=flaw.key),
                        "severity": flaw.severity,
                        "explanation": f"The claim of step {flaw.key} does not follow.",
                    }
                )
        if draws.chance(self.roles.false_alarm):
            step = f"S{draws.pick(3)}"
            findings.append(
                {
                    "id": f"F{len(findings) + 1}",
                    "location": _STEP.format(key=step),
                    "severity": "major",
                    "explanation": f"Step {step} seems to need more justification.",
                }
            )
        if draws.chance(self.roles.minor_rate):
            findings.append(
                {
                    "id": f"F{len(findings) + 1}",
                    "location": "This completes the proof.",
                    "severity": "minor",
                    "explanation": "The conclusion could restate what was shown.",
                }
            )
        if draws.chance(self.roles.no_verdict):
            return "I checked the steps and have some thoughts, but I will not give a verdict."
        blocking = any(f["severity"] != "minor" for f in findings)
        payload = {"findings": findings, "verdict": "fail" if blocking else "pass"}
        return f"Verification log.\n\n```json\n{json.dumps(payload)}\n```"

    def _review(self, request: RecordedRequest, draws: _Draws) -> str:
        found = self.proofs_in(request.user_text)
        real = {f.key for f in found[0].flaws} if found else set()
        report = request.user_text.split("# Verifier's report", 1)[-1]
        reviews = []
        for finding in _findings_of(report):
            location = str(finding.get("location", ""))
            is_real = any(f"Step {key}:" in location for key in real)
            if is_real:
                confirm = draws.chance(self.roles.review_confirm_real)
            else:
                confirm = not draws.chance(self.roles.review_reject_false)
            reviews.append(
                {
                    "id": finding.get("id"),
                    "decision": "confirmed" if confirm else "rejected",
                    "severity": finding.get("severity", "major"),
                    "reason": "checked against the proof",
                }
            )
        return f"Review.\n\n```json\n{json.dumps({'reviews': reviews})}\n```"

    def _judged(self, proof: ProofState, draws: _Draws, judge: str) -> int:
        """The score a judge of the run's family reads: it sees each flaw as that family's
        verifiers do (``judge`` is its prompt, with blind spots of its own when
        ``variant_correlation`` is below 1), and a proof whose flaws it all misses reads as a
        full proof."""
        if self.roles.judges_see_truth >= 0.5:
            return proof.score
        seen = [draws.chance(self._detect(flaw, judge)) for flaw in proof.flaws]  # one a flaw
        return proof.score if any(seen) else 7

    def _grade(self, request: RecordedRequest, draws: _Draws) -> str:
        found = self.proofs_in(request.user_text)
        score = self._judged(found[0], draws, "grader") if found else 0
        if draws.chance(self.roles.grader_noise):
            score += 1 if draws.chance(0.5) else -1
        score = min(max(score, 0), 7)
        payload = {"score": score, "justification": "graded against the steps"}
        return f"Assessment.\n\n```json\n{json.dumps(payload)}\n```"

    def _select(self, request: RecordedRequest, draws: _Draws) -> str:
        found = self.proofs_in(request.user_text)
        if not found:
            return "No proofs."
        payload = {
            "choice": chr(ord("A") + self._pick_best(found, draws)),
            "reason": "most rigorous",
        }
        return f"Choice.\n\n```json\n{json.dumps(payload)}\n```"

    def _pick_best(self, found: list[ProofState], draws: _Draws) -> int:
        """The selector's choice: with its accuracy, the best proof as it reads them (a tie
        broken at random, since proofs it reads alike give it nothing to go on); else any."""
        judged = [self._judged(proof, draws, "selector") for proof in found]
        if draws.chance(self.roles.selector_accuracy):
            best = [i for i, score in enumerate(judged) if score == max(judged)]
            # the earlier lab's all-knowing judge took the first of equals, with no draw
            return best[0] if self.roles.judges_see_truth >= 0.5 else best[draws.pick(len(best))]
        return draws.pick(len(found))


# The roles whose answer is a proof.
_WRITERS = ("generator", "reviser", "recombiner")
# The answer's share of a call's output tokens for the other roles; the rest is reasoning.
_ANSWER_SHARE = 0.2


def _findings_section(prompt: str) -> str:
    """A revision prompt's findings: those a reviewer confirmed or, in a run without
    reviews, those the verifiers reported."""
    for heading in ("# Confirmed findings", "# Reported findings"):
        if heading in prompt:
            return prompt.split(heading, 1)[-1]
    return prompt


def _view_of(request: RecordedRequest) -> str:
    """A verifier request's prompt, named by its system prompt's first line (each variant
    opens with its own)."""
    first = request.system_text.split("\n", 1)[0]
    return hashlib.sha256(first.encode()).hexdigest()[:12]


def _draw_key(request: RecordedRequest) -> bytes:
    """What a call's draws hang off: its body, less the fields of a thinking budget, so a
    budgeted call draws as the same call without one (common random numbers: a budget that
    is never reached changes nothing, and one that is changes only what it cuts)."""
    # and less the tools it offers, so a verifier offered the tool draws its reading as the
    # same call without it (the check is a draw of its own)
    dropped = (*BUDGET_FIELDS, "tools", "tool_choice")
    if not any(name in request.json for name in dropped):
        return request.body
    kept = {k: v for k, v in request.json.items() if k not in dropped}
    # the client's encoding (orjson, keys sorted), so the key is the unbudgeted body's bytes
    return orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)


def _answer_tokens(written: list[ProofState], completion: int) -> int:
    """The part of a call's output that is its answer, the rest being reasoning: for a
    writer the proof it wrote (``written``: its visible length, at most half the output), for
    any other role a fixed share of the output."""
    if written:
        return max(min(written[0].tokens, completion // 2), 1)
    return max(int(completion * _ANSWER_SHARE), 1)


def _thinking_budgeted(
    body: dict[str, object], completion: int, answer: int, limit: int
) -> int | None:
    """A thinking budget as SGLang's processor applies it (``custom_params.thinking_budget``):
    reasoning longer than the budget ends there and the answer follows, so a call that would
    have been cut at ``limit`` can end with its answer (``answer`` tokens of the
    ``completion``). The call's output tokens; None when no budget applies, or when even the
    shortened output passes ``limit`` (then it is cut)."""
    params = body.get("custom_params")
    budget = params.get("thinking_budget") if isinstance(params, dict) else None
    if not isinstance(budget, int) or completion - answer <= budget:
        return None
    total = budget + answer
    return total if not limit or total <= limit else None


def _findings_of(report: str) -> list[dict[str, object]]:
    """The findings a reviewer is shown (the verifier's JSON block, as rendered)."""
    match = re.search(r"```json\s*(\{.*?\})\s*```", report, re.S)
    if match:
        try:
            data = json.loads(match.group(1))
            return [f for f in data.get("findings", []) if isinstance(f, dict)]
        except ValueError:
            pass
    # Rendered findings (verifier.format_report): "### Finding F1 (severity: major)", then
    # the location.
    out: list[dict[str, object]] = []
    for block in re.split(r"(?=### Finding )", report):
        head = re.match(r"### Finding (\S+) \(severity: (\w+)\)", block)
        if head:
            out.append({"id": head.group(1), "severity": head.group(2), "location": block})
    return out
