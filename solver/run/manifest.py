"""What a run records about itself when it is created: the manifest, the blobs it names, and
the settings a resume takes back from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from solver import roles
from solver._util.clock import utc_now
from solver._util.masking import mask_argv, mask_url
from solver.config import ResolvedSettings, Settings
from solver.errors import RunCorrupt
from solver.identity import code_identity
from solver.problems import Problem
from solver.records import (
    MANIFEST_FORMAT,
    BlobLink,
    Manifest,
    ManifestConfig,
    ManifestEndpoint,
    ManifestModel,
    ManifestNetwork,
    ManifestProblem,
    ManifestRoleEndpoint,
    ManifestRoles,
)
from solver.roles import template_source
from solver.run.tools import toolbox_for
from solver.wire import Endpoint


def build_manifest(
    problem: Problem,
    problem_path: Path | None,
    resolved: ResolvedSettings,
    endpoint: Endpoint,
    recorded_endpoint: ManifestEndpoint,
    evaluation: bool,
    argv: list[str],
    run_id: str,
    role_endpoints: dict[str, Endpoint] | None = None,
) -> Manifest:
    """``role_endpoints``: the roles served by an endpoint of their own (policy key ->
    endpoint); each is named in the manifest and its host:port joins the allow-list."""
    role_endpoints = role_endpoints or {}
    toolbox = toolbox_for(resolved.settings)
    allow = [_host_port(endpoint.base_url)]
    for other in role_endpoints.values():
        if _host_port(other.base_url) not in allow:
            allow.append(_host_port(other.base_url))
    config = resolved.settings.masked()
    if resolved.settings.signing_key is not None:
        # Absolute, so a resume started from another directory finds the same key.
        config["signing_key"] = str(resolved.settings.signing_key.resolve())
    original = (
        BlobLink(blob=problem.original_digest, bytes=len(problem.original_bytes))
        if problem.original_bytes and problem.original_digest
        else None
    )
    return Manifest(
        run_id=run_id,
        created=utc_now().isoformat().replace("+00:00", "Z"),
        format=MANIFEST_FORMAT,
        hash="sha256",
        problem=ManifestProblem(
            path=str(problem_path) if problem_path else None,
            digest=problem.digest,
            original_digest=problem.original_digest,
            original=original,
            record=problem,
        ),
        config=ManifestConfig(resolved=config, sources=resolved.sources),
        argv=mask_argv(argv),
        code=code_identity(),
        # User info and query values are credentials: never stored; a resume takes the
        # URL again from this session's configuration (see solver.run.sources).
        endpoint=recorded_endpoint.model_copy(update={"url": mask_url(recorded_endpoint.url)}),
        model=ManifestModel(requested=endpoint.model or None),
        templates=roles.template_digests(),
        roles=ManifestRoles(
            policy={k: sorted(v) for k, v in roles.ISOLATION_POLICY.items()},
            tools=sorted({name for names in toolbox.role_tools.values() for name in names}),
            role_tools={k: list(v) for k, v in sorted(toolbox.role_tools.items())},
            max_tool_calls=dict(sorted(toolbox.max_calls.items())),
        ),
        evaluation=evaluation,
        network=ManifestNetwork(allow=allow, enforcement=["transport-allowlist"]),
        **(
            {
                "role_endpoints": {
                    key: ManifestRoleEndpoint(
                        url=mask_url(e.base_url), api=e.api, model=e.model or None
                    )
                    for key, e in sorted(role_endpoints.items())
                }
            }
            if role_endpoints
            else {}
        ),
    )


def read_manifest(raw: dict[str, Any], where: Path) -> Manifest:
    """A run's manifest as the store read it (JSON of our format), typed. A manifest that
    does not hold what every run's manifest holds is a damaged run (exit 65)."""
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise RunCorrupt(f"{where}/MANIFEST.json: {at}: {first['msg']}") from None


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def manifest_blobs(problem: Problem) -> list[bytes]:
    """Bytes the manifest names by digest, stored with it: the problem file as it was read,
    and every prompt template (under the digests of the manifest's templates)."""
    found = [template_source(name) for name in sorted(roles.template_digests())]
    if problem.original_bytes:
        found.insert(0, problem.original_bytes)
    return found


def settings_of_run(manifest: Manifest, resolved_now: ResolvedSettings) -> Settings:
    """The run's own settings (from its manifest), with the secret taken from today's
    environment: secrets are never written to a run."""
    data = dict(manifest.config.resolved)
    data.pop("api_key", None)
    now = resolved_now.settings
    return Settings.model_validate({**data, "api_key": now.api_key})
