"""The policy's configuration from a run's settings: what a session drives the loop with and
what the report and the progress line replay it with. Pure (no model client).

The copy is written out key by key so mypy checks each field's type; tests/run/
test_policy_settings.py ties it to the settings: every key of ``acceptance``, ``grading`` and
``budget`` is a PolicyConfig field of its name and type, or one of the derivations it names,
and each same-named key set to another value reaches the policy."""

from __future__ import annotations

from solver import roles
from solver.config import CHECKER, CHECKER_FINAL_VERIFICATIONS, Settings
from solver.errors import InputError
from solver.loop.policy import PolicyConfig


def policy_config(
    settings: Settings, *, evaluation: bool, material: bool, scheme: bool = False
) -> PolicyConfig:
    """``scheme``: the problem has a reference solution but no grading guidelines, so a
    marking scheme may be drafted (when ``grading.draft_scheme`` is on)."""
    acceptance = settings.acceptance
    grading = settings.grading
    checker = has_checker(settings)
    chosen = chosen_variants(settings)
    variants = len(chosen["verifier"])
    rounds = [("verifier", "acceptance.verifications", acceptance.verifications)]
    if checker:  # the checker's final round is its own requests
        rounds.append((CHECKER, "acceptance.final_verifications", final_round(settings)))
    for role, key, size in rounds:
        if settings.role(role).temperature == 0 and size > variants:
            # at temperature 0, two verifications of one variant are the same request twice
            raise InputError(
                f"roles.{role}.temperature is 0 and {key} is {size}: only {variants} "
                f"verifier variants exist, so {size - variants} verifications would repeat "
                f"another byte for byte; raise the temperature or lower {key}"
            )
    return PolicyConfig(
        candidates=settings.candidates,
        verifications=acceptance.verifications,
        accepted_needed=acceptance.accepted_needed,
        max_failed_rounds=acceptance.max_failed_rounds,
        max_lineages=_lineage_cap(settings),
        abandon_on_recurring=acceptance.abandon_on_recurring,
        reverify_no_verdict=acceptance.reverify_no_verdict,
        max_verifications=acceptance.max_verifications or 0,
        overturned_fail_passes=acceptance.overturned_fail_passes,
        verify_stage=acceptance.verify_stage,
        cancel_on_blocking=acceptance.cancel_on_blocking,
        review=acceptance.review,
        review_minor_on_pass=acceptance.review_minor_on_pass,
        recurrence_rounds=acceptance.recurrence_rounds,
        focus_after_accept=acceptance.focus_after_accept,
        start_lineages=acceptance.start_lineages,
        fill=settings.concurrency if acceptance.fill_slots else 0,
        minor_blocks=acceptance.minor_blocks,
        best_version=acceptance.best_version,
        self_improve=acceptance.self_improve,
        restart_from_pool=acceptance.restart_from_pool,
        refine_from_pool=acceptance.refine_from_pool,
        recombine=acceptance.recombine,
        final_verifications=final_round(settings),
        checks_by_checker=checker,
        recheck_answers=acceptance.recheck_answers,
        answers_agree=acceptance.answers_agree,
        pairwise_selection=acceptance.pairwise_selection,
        final_grades=acceptance.final_grades,
        wall_clock_s=settings.budget.wall_clock_s,
        total_tokens=settings.budget.total_tokens,
        calls=settings.budget.calls,
        evaluation=evaluation,
        evaluation_graders=settings.grading.evaluation_graders,
        evaluation_material=material,
        reconcile_spread=settings.grading.reconcile_spread,
        given_verifications=grading.given_verifications,
        reconcile=grading.reconcile,
        aggregation=grading.aggregation,
        grading_scale=grading.scale,
        draft_scheme=scheme and grading.draft_scheme,
        variants=chosen,
    )


# The roles whose calls take the prompt variants in turn, so a run may choose among them.
ROTATING_ROLES = ("generator", "verifier")


def chosen_variants(settings: Settings) -> dict[str, tuple[str, ...]]:
    """Each policy key's prompt variants, in turn order: those ``roles.<role>.variants``
    names for the generator and the verifier (and the keys that use their templates), every
    variant that ships otherwise. InputError for a name no variant has, or for a role whose
    variant the policy picks itself."""
    chosen = {name: roles.get_role(name).variants for name in roles.POLICY_KEYS}
    for role, role_settings in settings.roles.items():
        names = role_settings.variants
        if names is None:
            continue
        if role not in ROTATING_ROLES:
            raise InputError(
                f"roles.{role}.variants: only {' and '.join(ROTATING_ROLES)} calls take "
                "variants in turn; remove the setting"
            )
        known = chosen[role]
        unknown = [name for name in names if name not in known]
        if unknown or len(set(names)) != len(names):
            raise InputError(
                f"roles.{role}.variants {names!r}: each must be one of {', '.join(known)}, "
                "named once"
            )
        for key in chosen:
            if key == role or key.startswith(f"{role}:"):
                chosen[key] = tuple(names)
    return chosen


def _lineage_cap(settings: Settings) -> int:
    """How many lineages may be started: as set; else, when the budget drives the search,
    as many as a budget allows (the budget ends the search, not a count); else 3 x candidates."""
    acceptance, budget = settings.acceptance, settings.budget
    if acceptance.max_lineages is not None:
        return acceptance.max_lineages
    has_budget = any(
        b is not None for b in (budget.wall_clock_s, budget.total_tokens, budget.calls)
    )
    if acceptance.lineages_follow_budget and has_budget:
        return 1_000_000
    return 3 * settings.candidates


def has_checker(settings: Settings) -> bool:
    """Whether the later checks run on a checker of another family (``roles.checker``)."""
    return bool(settings.role(CHECKER).endpoint)


def final_round(settings: Settings) -> int:
    """The final round's size: as set, else a checker's default when one is configured."""
    chosen = settings.acceptance.final_verifications
    if chosen is not None:
        return chosen
    return CHECKER_FINAL_VERIFICATIONS if has_checker(settings) else 0
