"""Where a run's model endpoint and signing key come from, at its start and on resume."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from solver import roles
from solver._util.masking import MASK, mask_url
from solver.config import Settings
from solver.endpoint_file import EndpointDescriptor, read_descriptor
from solver.errors import EndpointUnavailable, InputError, ModelChanged
from solver.records import Manifest, ManifestEndpoint
from solver.run.manifest import read_manifest
from solver.run.tools import settings_role as settings_role
from solver.run.tools import toolbox_for as toolbox_for
from solver.store import ATTESTATION_NAME, RunReader, StoreError, key_ids, load_private_key
from solver.wire import Endpoint

if TYPE_CHECKING:
    from solver.loop.state import RunState


def resolve_endpoint(settings: Settings) -> tuple[Endpoint, ManifestEndpoint]:
    """The endpoint from the settings, else from the descriptor `solver local up` or
    `solver serve up` wrote, with what the manifest records of it. Raises InputError with one
    sentence when there is none."""
    key = settings.api_key.get_secret_value() if settings.api_key else None
    if settings.endpoint:
        endpoint = Endpoint(
            base_url=settings.endpoint, api=settings.api, model=settings.model or "", api_key=key
        )
        return endpoint, ManifestEndpoint(
            url=endpoint.base_url, api=endpoint.api, source="configured"
        )
    descriptor = live_descriptor()
    if descriptor is not None:
        endpoint = Endpoint(
            base_url=descriptor.base_url,
            api=descriptor.api,
            model=settings.model or descriptor.model,
            api_key=key,
        )
        recorded = ManifestEndpoint(
            url=endpoint.base_url,
            api=endpoint.api,
            source=descriptor.source,
            gguf_sha256=descriptor.gguf_sha256,
        )
        return endpoint, recorded
    raise InputError(
        "no model endpoint is configured: set SOLVER_ENDPOINT (or --endpoint), "
        "or start a model server with `solver local up` or `solver serve up`"
    )


def role_endpoints(settings: Settings, env: Mapping[str, str] | None = None) -> dict[str, Endpoint]:
    """Policy key -> the endpoint its calls go to, for the roles configured with one of their
    own (``roles.grader.endpoint``: graders of another model family); the others use the
    run's endpoint. The key comes from the variable ``api_key_env`` names, read now."""
    env = os.environ if env is None else env
    found: dict[str, Endpoint] = {}
    for key in roles.POLICY_KEYS:
        name = settings_role(key)
        chosen = settings.role(name)
        if not chosen.endpoint:
            continue
        api_key = None
        if chosen.api_key_env:
            api_key = env.get(chosen.api_key_env)
            if not api_key:
                raise InputError(
                    f"roles.{name}.api_key_env names {chosen.api_key_env}, which is not set"
                )
        found[key] = Endpoint(
            base_url=chosen.endpoint,
            api=chosen.api or settings.api,
            model=chosen.model or "",
            api_key=api_key,
        )
    return found


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def live_descriptor() -> EndpointDescriptor | None:
    """The endpoint descriptor, refused at once when the server it names has died (waiting
    endpoint_wait_s for a process that is gone would only hang silently)."""
    descriptor = read_descriptor()
    if descriptor is not None and not _pid_running(descriptor.pid):
        if descriptor.source == "local":
            raise EndpointUnavailable(
                f"the local server (pid {descriptor.pid}) is not running: run `solver local up`"
            )
        raise EndpointUnavailable(
            f"the model server (pid {descriptor.pid}) is not running: run `solver serve up`"
        )
    return descriptor


@dataclass(frozen=True)
class ResumeTarget:
    """Where a resumed session sends its requests, and ``moved``: the masked URL to record in
    its ``session.started`` when it is not the run's own endpoint (`resume --endpoint`)."""

    endpoint: Endpoint
    moved: str | None


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def resume_endpoint(
    recorded: ManifestEndpoint,
    requested_model: str | None,
    now: Settings,
    moved_to: str | None = None,
) -> ResumeTarget:
    """The endpoint a resumed run talks to, decided before anything is sent.

    - ``moved_to`` (`solver resume RUN --endpoint URL`): that URL, for a server that moved.
    - the embedded model: the current `solver local up` descriptor (its port changes every
      time), which must serve the same GGUF file.
    - otherwise the run's own URL. Its user info and query values were masked when stored,
      so a URL that held them must be named again by this session's configuration.

    Today's API key goes only to an endpoint this session's configuration names (settings
    or ``--endpoint``); a configured endpoint that differs from the run's is refused, naming
    both, rather than silently ignored or silently followed."""
    recorded_url = recorded.url
    configured = now.endpoint
    api_key = now.api_key.get_secret_value() if now.api_key else None
    model = requested_model or ""
    if moved_to is not None:
        shown = mask_url(moved_to)
        moved = None if _same_url(shown, recorded_url) else shown
        return ResumeTarget(Endpoint(moved_to, recorded.api, model, api_key), moved)
    if recorded.source == "local":
        descriptor = live_descriptor()
        if descriptor is None or descriptor.source != "local":
            raise EndpointUnavailable(
                "this run used the embedded model, which is not running: run `solver local up`"
            )
        if descriptor.gguf_sha256 != recorded.gguf_sha256:
            raise ModelChanged(
                f"the embedded model now serves GGUF {descriptor.gguf_sha256}, but this run "
                f"used {recorded.gguf_sha256}: start `solver local up` with that file"
            )
        key = api_key if configured and _same_url(configured, descriptor.base_url) else None
        return ResumeTarget(Endpoint(descriptor.base_url, recorded.api, model, key), None)
    if configured is not None and not _same_url(mask_url(configured), recorded_url):
        raise InputError(
            f"this run's endpoint is {recorded_url}, but this session's configuration names "
            f"{mask_url(configured)}: to move the run there, pass it explicitly with "
            "`solver resume RUN --endpoint URL`; otherwise unset it"
        )
    if configured is not None:
        return ResumeTarget(Endpoint(configured, recorded.api, model, api_key), None)
    if MASK in recorded_url:
        raise InputError(
            f"this run's endpoint {recorded_url} held credentials, which are never stored: "
            "name it again with SOLVER_ENDPOINT or `solver resume RUN --endpoint URL`"
        )
    if api_key is not None:
        raise InputError(
            f"an API key is configured but no endpoint: set SOLVER_ENDPOINT to this run's "
            f"endpoint ({recorded_url}) or pass --endpoint, so that the key is sent only "
            "where this session says"
        )
    return ResumeTarget(Endpoint(recorded_url, recorded.api, model, None), None)


def run_signing_key(manifest: Manifest, today: Path | None) -> Path | None:
    """The key that continues a run: for a signed run, the first of today's signing_key and
    the path the run recorded whose key id is the one in the manifest (a resume from another
    directory or with another config must not silently drop the signing); none is an error."""
    if manifest.signing is None:
        return today  # an unsigned run: today's key, if any, seals it from here on
    wanted = manifest.signing.keyid
    recorded = manifest.config.signing_key
    tried: list[Path] = []
    for candidate in (today, Path(recorded) if recorded is not None else None):
        if candidate is None or candidate in tried:
            continue
        tried.append(candidate)
        try:
            key = load_private_key(candidate)
        except StoreError:
            continue
        if wanted in key_ids(key.public_key()):  # either id form (format 1 or 2)
            return candidate
    looked = ", ".join(str(path) for path in tried) or "no signing_key configured"
    raise InputError(
        f"this run is signed with key {wanted[:16]}, and no private key with that id could "
        f"be loaded ({looked}): set signing_key to that key to continue it"
    )


def resume_signing_key(
    run_dir: Path, today: Path | None, state: Callable[[], RunState]
) -> Path | None:
    """The key a resume needs (see :func:`run_signing_key`). A finished run whose last session
    ended and whose attestation exists needs none: resuming it writes nothing, so a key that
    has moved since does not stop it from reporting its outcome."""
    try:
        return run_signing_key(read_manifest(RunReader(run_dir).manifest, run_dir), today)
    except InputError:
        if (run_dir / ATTESTATION_NAME).is_file():
            now = state()
            if now.phase == "finished" and not now.session_open:
                return None
        raise
