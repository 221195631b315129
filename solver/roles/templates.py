"""The prompt templates: loading (from the ``prompts`` package data), rendering, digests.

Templates are fixed files. Rendering uses ``StrictUndefined`` (a missing input is an error, never
an empty string), no autoescaping (the text is Markdown and LaTeX, not HTML) and has no access to
time, randomness or the environment, so the same inputs always give the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import jinja2
import jinja2.meta

from solver.roles.base import proof_label

_PACKAGE = "solver.roles.prompts"
_SUFFIX = ".j2"


def _root() -> Traversable:
    return resources.files(_PACKAGE)


def _resolve(name: str) -> Traversable:
    parts = name.split("/")
    if not name.endswith(_SUFFIX) or any(p in ("", ".", "..") for p in parts):
        raise jinja2.TemplateNotFound(name)
    node = _root()
    for part in parts:
        node = node.joinpath(part)
    if not node.is_file():
        raise jinja2.TemplateNotFound(name)
    return node


@cache
def template_source(name: str) -> bytes:
    """The exact bytes of a template, by its path relative to ``prompts/``. Read once per
    process, so what is rendered and what is hashed into a run can never disagree."""
    return _resolve(name).read_bytes()


def _load(name: str) -> tuple[str, str, Callable[[], bool]]:
    source = template_source(name).decode("utf-8")
    # Templates are package data and never change while a process runs.
    return source, name, lambda: True


def build_environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """The one set of rendering settings, over any loader: the installed templates, or (for
    the audit) the template bytes a run stored, so an old run renders as it was made."""
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["proof_label"] = proof_label
    return env


@cache
def environment() -> jinja2.Environment:
    return build_environment(jinja2.FunctionLoader(_load))


def environment_from(source: Callable[[str], bytes | None]) -> jinja2.Environment:
    """An environment whose templates come from ``source(name)`` (None: no such template)."""

    def load(name: str) -> tuple[str, str, Callable[[], bool]] | None:
        data = source(name)
        if data is None:
            return None
        return data.decode("utf-8"), name, lambda: True

    return build_environment(jinja2.FunctionLoader(load))


def _walk(node: Traversable, prefix: str) -> Iterator[str]:
    for child in sorted(node.iterdir(), key=lambda item: item.name):
        if child.is_dir():
            if child.name != "__pycache__" and not child.name.startswith("."):
                yield from _walk(child, f"{prefix}{child.name}/")
        elif child.name.endswith(_SUFFIX):
            yield f"{prefix}{child.name}"


@cache
def template_names() -> tuple[str, ...]:
    """Every template under ``prompts/``, sorted, as paths relative to it. Listed once per
    process, like the bytes (``template_source``): a context is built from these for every
    call, and walking the package and parsing each template again cost more than the call."""
    return tuple(_walk(_root(), ""))


@cache
def _digests() -> tuple[tuple[str, str], ...]:
    return tuple(
        (name, "sha256:" + hashlib.sha256(template_source(name)).hexdigest())
        for name in template_names()
    )


def template_digests() -> dict[str, str]:
    """Template path (relative to ``prompts/``) -> ``"sha256:<hex>"`` of its bytes."""
    return dict(_digests())


@cache
def referenced_templates(name: str) -> tuple[str, ...]:
    """``name`` and every template it includes or extends, transitively, sorted."""
    seen: set[str] = set()
    pending = [name]
    env = environment()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        tree = env.parse(template_source(current).decode("utf-8"))
        for child in jinja2.meta.find_referenced_templates(tree):
            if child is None:
                raise ValueError(f"{current} includes a template chosen at run time")
            pending.append(child)
    return tuple(sorted(seen))


def render_template(
    name: str, context: Mapping[str, Any], env: jinja2.Environment | None = None
) -> str:
    """Render one template; surrounding blank lines are trimmed, nothing else is touched."""
    text = (env or environment()).get_template(name).render(dict(context))
    return text.strip("\n") + "\n"
