"""The check of an endpoint before a run is made: it answers, speaks the protocol asked for,
serves the model named, and has room in its context for the statement and an answer.

Each question costs one request with a short deadline (``timeouts.preflight_s``) and
generates nothing: ``GET /v1/models`` (the same on Anthropic's API), then an empty JSON
object posted to the protocol's path, which a server of that protocol refuses as invalid
(400 or 422) and any other answers 404 or 405. So a closed port, an unroutable address, a
plain web server, a wrong protocol or model name ends in seconds, with one line and its exit
code (3: nothing answers; 2: something answers but is not what the configuration says), and
no run directory is left behind.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import orjson

from solver import roles
from solver._util.masking import mask_url
from solver.config import Settings
from solver.errors import ConfigError, EndpointUnavailable, InputError
from solver.llm import (
    Api,
    Deadlines,
    Endpoint,
    EndpointUnreachable,
    HTTPStatusError,
    Message,
    ModelClient,
    ProbeTimeout,
    Request,
    RetryPolicy,
    RouteAnswer,
    ServerInfo,
    TransportError,
    estimate_prompt_tokens,
)
from solver.problems import Problem
from solver.roles import generator
from solver.run.sources import resolve_endpoint, role_endpoints
from solver.run.tools import sandbox_ready
from solver.wire import Role

__all__ = ["ANSWER_ROOM", "preflight", "preflight_endpoint"]

PROTOCOL_NAMES = {
    "chat": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
}
# The fewest output tokens a statement must leave for the generator's answer (or its
# max_tokens, when that is smaller; or its min_tokens, when that is larger): below it the
# search could only collect answers cut off at their first lines.
ANSWER_ROOM = 512
# A route that answers these to an empty body does not exist on the server.
_NO_ROUTE = (404, 405)


@dataclass(frozen=True)
class _Target:
    endpoint: Endpoint
    used_by: str  # "the run", or the roles with an endpoint of their own


async def preflight(settings: Settings, problems: Sequence[Problem]) -> None:
    """Check every endpoint the run will call (its own, and those of roles with their own)
    before anything is written. ``timeouts.preflight_s`` 0 skips the check. Raises
    :class:`ConfigError` (exit 2) or :class:`EndpointUnavailable` (exit 3); first, with a
    role's tools on, :class:`SandboxUnavailable` (exit 7) when the sandbox cannot start."""
    await sandbox_ready(settings)
    timeout = settings.timeouts.preflight_s
    if timeout <= 0:
        return
    endpoint, _ = resolve_endpoint(settings)
    targets = [_Target(endpoint, "the run")]
    for key, other in sorted(role_endpoints(settings).items()):
        ident = (other.base_url, other.api, other.model)
        known = [(t.endpoint.base_url, t.endpoint.api, t.endpoint.model) for t in targets]
        if ident not in known:
            targets.append(_Target(other, f"roles.{key.split(':')[0]}"))
    for target in targets:
        info = await preflight_endpoint(target.endpoint, timeout, target.used_by)
        if target.used_by == "the run":
            _check_room(settings, problems, info, target.endpoint)


async def preflight_endpoint(endpoint: Endpoint, timeout: float, used_by: str) -> ServerInfo | None:
    """The checks of one endpoint; what it said about itself (None: it has no models list)."""
    deadlines = Deadlines(connect=timeout, first_byte=timeout, idle=timeout, probe=timeout)
    shown = mask_url(endpoint.base_url)
    where = f"{shown} (endpoint of {used_by})" if used_by != "the run" else shown
    async with ModelClient(endpoint, deadlines=deadlines, retry=RetryPolicy(max_attempts=1)) as c:
        info = await _models(c, endpoint, where, timeout)
        answer = await _route(c, endpoint, where, timeout)
        if answer.status in _NO_ROUTE or _is_html(answer.content_type, answer.body):
            raise ConfigError(await _no_protocol(c, endpoint, where, answer, timeout))
        if answer.status in (401, 403):
            raise ConfigError(_refused_key(where, answer.status, endpoint))
    setting = "--model (or SOLVER_MODEL)" if used_by == "the run" else f"{used_by}.model"
    _check_model(endpoint, info, where, setting)
    return info


async def _models(
    client: ModelClient, endpoint: Endpoint, where: str, timeout: float
) -> ServerInfo | None:
    """``GET /v1/models``; None where it is not served (Anthropic-style servers may not)."""
    try:
        info = await client.probe()
    except HTTPStatusError as exc:
        if exc.status in (401, 403):
            raise ConfigError(_refused_key(where, exc.status, endpoint)) from None
        if exc.status in _NO_ROUTE:
            return None  # the protocol's own path tells whether this is a model server
        if exc.retryable:
            raise EndpointUnavailable(
                f"{where}: the server answers HTTP {exc.status} to GET /v1/models: it is up "
                "but not serving yet; wait for it, or set timeouts.preflight_s = 0 to let the "
                "run wait for it (retry.endpoint_wait_s)"
            ) from None
        raise ConfigError(
            f"{where}: GET /v1/models answered HTTP {exc.status}: "
            f"{exc.body_excerpt[:200]!r}; check --endpoint"
        ) from None
    except TransportError as exc:
        raise _unreachable(exc, where, timeout) from None
    if _is_html("", info.raw):
        raise ConfigError(
            f"{where}: GET /v1/models answered with a web page, not a models list: a web "
            "server, not a model endpoint; check --endpoint (the model server's API root, "
            "such as http://127.0.0.1:30000/v1)"
        )
    if not _is_models_list(info.raw):
        raise ConfigError(
            f"{where}: GET /v1/models answered {info.raw[:80]!r}, not a models list; check "
            "--endpoint (the model server's API root, such as http://127.0.0.1:30000/v1)"
        )
    return info


async def _route(
    client: ModelClient, endpoint: Endpoint, where: str, timeout: float
) -> RouteAnswer:
    try:
        return await client.route_answer()
    except TransportError as exc:
        raise _unreachable(exc, where, timeout) from None


async def _no_protocol(
    client: ModelClient, endpoint: Endpoint, where: str, answer: RouteAnswer, timeout: float
) -> str:
    """The line for a server without the protocol's path: which protocol it speaks, if one."""
    path = urlsplit(answer.url).path
    how = f"answered HTTP {answer.status}"
    if _is_html(answer.content_type, answer.body):
        how = f"answered with a web page (HTTP {answer.status})"
    first = f"{where}: POST {path} {how}: it does not serve {PROTOCOL_NAMES[endpoint.api]}"
    others: tuple[Api, ...] = ("chat", "responses", "anthropic")
    for other in others:
        if other == endpoint.api:
            continue
        try:
            tried = await client.route_answer(other)
        except TransportError:
            break
        if tried.status not in _NO_ROUTE and not _is_html(tried.content_type, tried.body):
            return (
                f"{first}; it serves {PROTOCOL_NAMES[other]} at {urlsplit(tried.url).path}: use "
                f"--api {other} (or SOLVER_API={other})"
            )
    return (
        f"{first}, nor any other protocol the solver speaks; check --endpoint (the model "
        "server's API root, such as http://127.0.0.1:30000/v1)"
    )


def _unreachable(exc: TransportError, where: str, timeout: float) -> EndpointUnavailable:
    text = str(exc)
    if isinstance(exc, ProbeTimeout):
        why = f"it accepts connections but answered nothing within {timeout:g} s"
    elif "ConnectTimeout" in text:
        why = f"no connection within {timeout:g} s (an unroutable address, or a firewall)"
    elif "ConnectError" in text:
        why = "the connection was refused or failed (is the server running, on that port?)"
    elif isinstance(exc, EndpointUnreachable):
        why = "the connection failed (" + text.split(": ", 1)[-1][:200] + ")"
    else:
        why = text[:200]
    return EndpointUnavailable(
        f"{where}: the model endpoint does not answer: {why}; start the model server or "
        "check --endpoint (timeouts.preflight_s sets how long this check waits; 0 lets the "
        "run wait for the endpoint instead)"
    )


def _refused_key(where: str, status: int, endpoint: Endpoint) -> str:
    if endpoint.api_key:
        return (
            f"{where}: the server refused the API key (HTTP {status}); check SOLVER_API_KEY "
            "(or the protocol's own key variable)"
        )
    return (
        f"{where}: the server wants an API key (HTTP {status}); set SOLVER_API_KEY "
        "(or OPENAI_API_KEY / ANTHROPIC_API_KEY)"
    )


def _check_model(endpoint: Endpoint, info: ServerInfo | None, where: str, setting: str) -> None:
    if info is None or not endpoint.model or not info.models:
        return
    if endpoint.model in info.models:
        return
    served = ", ".join(repr(m) for m in info.models[:8])
    if len(info.models) > 8:
        served += f" and {len(info.models) - 8} more"
    close = difflib.get_close_matches(endpoint.model, info.models, n=1, cutoff=0.4)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"{where}: the model {endpoint.model!r} is not served there; it serves {served}; "
        f"{hint}set {setting}, or leave it unset to use what is served"
    )


def _check_room(
    settings: Settings, problems: Sequence[Problem], info: ServerInfo | None, endpoint: Endpoint
) -> None:
    """Refuse a statement that leaves the generator no room for an answer in the model's
    context (the server's, else ``context_length`` of the config)."""
    context = (info.context_length if info else None) or settings.context_length
    if context is None:
        return
    chosen = settings.role("generator")
    needed = max(min(ANSWER_ROOM, chosen.max_tokens), min(chosen.min_tokens, chosen.max_tokens))
    variants = settings.role("generator").variants or roles.get_role("generator").variants
    for problem in problems:
        inputs = generator.Inputs(problem_statement=problem.statement)
        prompt = max(
            estimate_prompt_tokens(
                Request(
                    model=endpoint.model,
                    messages=tuple(
                        Message.text(cast(Role, role), text)
                        for role, text in roles.render("generator", variant, inputs)
                    ),
                    max_tokens=1,
                )
            )
            for variant in variants
        )
        room = context - prompt
        if room < needed:
            source = "the server's" if info and info.context_length else "context_length's"
            raise InputError(
                f"{problem.id}: the statement does not fit the model: its generator prompt "
                f"is about {prompt} tokens and the model's context ({source}) is {context}, "
                f"which leaves {max(room, 0)} for the answer, fewer than {needed}; shorten the "
                "statement or serve the model with a longer context"
            )


def _is_html(content_type: str, body: bytes) -> bool:
    if "html" in content_type.lower():
        return True
    head = body.lstrip()[:64].lower()
    return head.startswith((b"<!doctype", b"<html", b"<head", b"<body"))


def _is_models_list(raw: bytes) -> bool:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and isinstance(body.get("data"), list)
