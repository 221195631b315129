"""PolicyConfig is tied to the settings it is made from: every key of ``acceptance``,
``grading`` and ``budget`` reaches the policy (under its own name and type, or through one of
the derivations named here), so a setting added without its policy field, or a copy line
forgotten, fails here instead of being silently ignored by the loop."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from solver.config import Settings
from solver.loop.policy import PolicyConfig
from solver.run.policy_settings import policy_config

SECTIONS = ("acceptance", "grading", "budget")

# Settings keys the policy takes under another name or type, or derives a field from
# (policy_settings.py), each with the policy field it feeds (None: a key the loop's policy does
# not read, used elsewhere).
DERIVED: dict[str, str | None] = {
    "acceptance.max_lineages": "max_lineages",  # None: a cap from the budget or candidates
    "acceptance.lineages_follow_budget": "max_lineages",
    "acceptance.max_verifications": "max_verifications",  # None: 0, the policy's 2 x K
    "acceptance.fill_slots": "fill",  # on: the run's concurrency
    "acceptance.final_verifications": "final_verifications",  # None: a checker's default
    "grading.scale": "grading_scale",
    "grading.given_comparisons": None,  # the calibration's comparisons, not the loop's
    "budget.reserve": None,  # the engine's admission rule (Engine.reserve_full)
}


def _section(name: str) -> type[BaseModel]:
    annotation = Settings.model_fields[name].annotation
    assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
    return annotation


def _same_named() -> list[tuple[str, str]]:
    return [
        (section, key)
        for section in SECTIONS
        for key in _section(section).model_fields
        if f"{section}.{key}" not in DERIVED
    ]


def test_every_setting_of_the_policy_sections_reaches_a_policy_field_of_its_type() -> None:
    hints = typing.get_type_hints(PolicyConfig)
    fields = {field.name for field in dataclasses.fields(PolicyConfig)}
    for dotted, target in DERIVED.items():
        section, key = dotted.split(".")
        assert key in _section(section).model_fields, f"{dotted} is no setting any more"
        assert target is None or target in fields, f"{dotted} feeds no field {target}"
    for section, key in _same_named():
        assert key in hints, f"{section}.{key} has no PolicyConfig field of its name"
        setting = _section(section).model_fields[key].annotation
        assert hints[key] == setting, f"{section}.{key}: {setting} in settings, {hints[key]}"


def _other_value(annotation: Any, value: Any) -> Any:
    if annotation is bool:
        return not value
    choices = get_args(annotation)
    if choices and all(isinstance(choice, str) for choice in choices):
        return next(choice for choice in choices if choice != value)
    if value is None:
        return 7
    return value + 2  # +2: recombine takes 2 to 4 (0 off)


@pytest.mark.parametrize(("section", "key"), _same_named())
def test_a_same_named_setting_is_copied_into_the_policy(section: str, key: str) -> None:
    defaults = Settings()
    annotation = _section(section).model_fields[key].annotation
    value = _other_value(annotation, getattr(getattr(defaults, section), key))
    settings = Settings.model_validate(
        defaults.model_dump() | {section: getattr(defaults, section).model_dump() | {key: value}}
    )
    config = policy_config(settings, evaluation=False, material=True)
    assert getattr(config, key) == value
