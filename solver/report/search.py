"""What the search policy is doing, per version: its verifications' outcomes as the policy
counts them, its pass rate, whether it is its lineage's best version, and the stage of its
verification. The live progress view and the run report both show it.

Everything here is read through the policy's own functions (``solver.loop.policy``), with the
run's own acceptance settings, so the view cannot disagree with what the policy decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from solver.config import Settings
from solver.errors import InputError
from solver.loop.policy import (
    FINAL,
    RECHECK,
    PolicyConfig,
    best_version,
    check_size,
    pass_rate,
    verification_outcome,
)
from solver.loop.state import CallState, RunState, check_kind, verification_calls
from solver.roles import VERIFIER_CHECK as CHECK
from solver.run import policy_config, read_manifest, read_state

__all__ = ["SearchView", "VersionSearch", "load_search", "policy_of_run", "search_view"]


@dataclass(frozen=True)
class VersionSearch:
    """One version's verification, as the policy counts it."""

    lineage: str
    version: int
    status: str  # the version's status: open, failed, accepted, unusable
    passed: int
    failed: int
    void: int  # no verdict, cancelled, or an overturned fail that is not a pass
    pending: int
    cancelled: int  # of which stopped by the policy or the run's end
    pass_rate: float | None  # passes over verdicts; None before any verdict
    best: bool  # the version the lineage revises from and would submit
    # "first 2 of 5", "rest 3 of 5", "all 5"; once accepted, the later check under way or
    # last made: "final round of 5", "recheck round of 5 by the checker"
    stage: str

    @property
    def verdicts(self) -> int:
        return self.passed + self.failed

    def rate_text(self) -> str:
        if self.pass_rate is None:
            return "-"
        return f"{self.passed}/{self.verdicts} ({self.pass_rate:.0%})"

    def summary(self) -> str:
        """``verified 2/3 (67%), stage first 2 of 5, 1 without verdict, 2 cancelled, best``"""
        if self.stage == "-":
            parts = ["not verified"]
        else:
            parts = [f"verified {self.rate_text()}", f"stage {self.stage}"]
        # cancelled calls count as no verdict too; they are named on their own below
        unjudged = self.void - self.cancelled
        if unjudged:
            parts.append(
                f"{unjudged} without verdict (the call failed, was cut off or unreadable, or "
                "its findings were all rejected on review)"
            )
        if self.pending:
            parts.append(f"{self.pending} pending")
        if self.cancelled:
            parts.append(f"{self.cancelled} cancelled")
        if self.best:
            parts.append("best")
        return ", ".join(parts)


@dataclass(frozen=True)
class SearchView:
    versions: tuple[VersionSearch, ...]
    cancelled: int  # cancelled calls of the run, every role
    verifications: int  # K
    stage: int  # verifications asked first (0: all K at once)
    reviews: bool = True  # a reviewer checks failing reports (``acceptance.review``)

    def of(self, lineage: str, version: int) -> VersionSearch | None:
        for entry in self.versions:
            if entry.lineage == lineage and entry.version == version:
                return entry
        return None

    def best_of(self, lineage: str) -> VersionSearch | None:
        return next((v for v in self.versions if v.lineage == lineage and v.best), None)

    def settings_text(self) -> str:
        """How the run verifies, e.g. ``staged verification: 2 first, the other 3 if all
        pass``."""
        k = self.verifications
        if 0 < self.stage < k:
            text = (
                f"staged verification: {self.stage} first, the other {k - self.stage} if all pass"
            )
        else:
            text = f"{k} verifications at once"
        if not self.reviews:
            text += "; no reviewer: a failing report's findings stand as written"
        return text


def _stage(cfg: PolicyConfig, calls: list[CallState], passed: int, failed: int) -> str:
    """The stage of a version's verification (``calls``, of which ``passed`` and ``failed``
    as the policy counts them)."""
    for kind in (RECHECK, FINAL):  # a recheck comes after the final round
        check = [c for c in calls if check_kind(c) == kind]
        if check:
            by = " by the checker" if any(c.role == CHECK for c in check) else ""
            return f"{kind} round of {check_size(kind, cfg)}{by}"
    # no later check: every call is one of the version's rounds
    k = cfg.verifications
    first = cfg.verify_stage
    if not 0 < first < k:
        return f"all {k}"
    # The policy asks the rest only once the first stage has passed (policy._verify_round).
    if passed >= first and not failed:
        return f"rest {k - first} of {k}"
    return f"first {first} of {k}"


def search_view(state: RunState, cfg: PolicyConfig) -> SearchView:
    """Every version of every lineage, with the policy's counts."""
    entries: list[VersionSearch] = []
    for lineage in sorted(state.lineages.values(), key=lambda ln: ln.index):
        best = best_version(state, lineage, cfg) if cfg.best_version else None
        best_number = best.version if best is not None else None
        if best_number is None and lineage.accepted_version is not None:
            best_number = lineage.accepted_version
        for version in sorted(lineage.versions.values(), key=lambda v: v.version):
            calls = verification_calls(state, lineage.lineage, version.version)
            outcomes = [verification_outcome(state, c, cfg) for c in calls]
            passed = outcomes.count("pass")
            failed = outcomes.count("fail")
            entries.append(
                VersionSearch(
                    lineage=lineage.lineage,
                    version=version.version,
                    status=version.status,
                    passed=passed,
                    failed=failed,
                    void=outcomes.count("void"),
                    pending=outcomes.count("pending"),
                    cancelled=sum(1 for c in calls if c.status == "cancelled"),
                    pass_rate=pass_rate(state, lineage.lineage, version.version, cfg),
                    best=version.version == best_number,
                    stage=_stage(cfg, calls, passed, failed) if calls else "-",
                )
            )
    cancelled = sum(1 for c in state.calls.values() if c.status == "cancelled")
    return SearchView(tuple(entries), cancelled, cfg.verifications, cfg.verify_stage, cfg.review)


def policy_of_run(resolved: dict[str, object]) -> PolicyConfig:
    """The acceptance rules a run was made with (its manifest's resolved settings)."""
    data = {k: v for k, v in resolved.items() if k != "api_key"}
    settings = Settings.model_validate(data)
    return policy_config(settings, evaluation=False, material=True)


def load_search(run_dir: Path) -> SearchView | None:
    """The search view of a run directory (its journal, under its own settings); None when
    its settings no longer read as today's settings (the report then leaves it out)."""
    reader, state = read_state(run_dir)
    manifest = read_manifest(reader.manifest, run_dir)
    try:
        cfg = policy_of_run(dict(manifest.config.resolved))
    except (ValidationError, InputError):
        return None
    return search_view(state, cfg)
