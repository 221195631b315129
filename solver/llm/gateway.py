"""What SGLang's gateway (smg) changes about a server, read back.

- smg 1.13.0 answers every proxied request with ``x-smg-routed-worker-id: <worker URL>``
  (checked live; the stream body passes through unchanged). The header comes from the
  network, so it is bounded, stripped of anything but printable ASCII, and its userinfo (a
  ``user:password@`` a worker URL could carry) is masked before it is journaled.
- Its ``/v1/models`` says ``owned_by: "self_hosted"`` and drops the workers'
  ``max_model_len``; its own ``GET /workers`` still has each worker's served models with their
  ``context_length`` and a ``runtime_type``. :func:`gateway_workers_facts` reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import orjson

__all__ = ["ROUTED_WORKER_HEADER", "gateway_workers_facts", "routed_worker"]

ROUTED_WORKER_HEADER = "x-smg-routed-worker-id"
_MAX = 200
_USERINFO = re.compile(r"(?<=://)[^/@]*@")


def routed_worker(headers: Mapping[str, str]) -> str | None:
    """The routed worker a gateway names in ``headers``, or None (no gateway, or nothing
    printable)."""
    value = headers.get(ROUTED_WORKER_HEADER)
    if not value:
        return None
    shown = "".join(ch for ch in value[:_MAX] if " " < ch <= "~")
    return _USERINFO.sub("***@", shown) or None


def gateway_workers_facts(raw: bytes, models: tuple[str, ...]) -> tuple[int | None, str | None]:
    """From smg's ``GET /workers`` body: the smallest ``context_length`` any healthy worker
    gives for one of ``models`` (a request must fit whichever worker it lands on), and the
    workers' ``runtime_type`` when they all say the same one (``sglang``), else None."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, None
    listed = body.get("workers") if isinstance(body, dict) else None
    if not isinstance(listed, list):
        return None, None
    lengths: list[int] = []
    runtimes: set[str] = set()
    for worker in listed:
        if not isinstance(worker, dict) or worker.get("is_healthy") is False:
            continue
        runtime = worker.get("runtime_type")
        runtimes.add(runtime[:64] if isinstance(runtime, str) else "")
        served = worker.get("models")
        for model in served if isinstance(served, list) else []:
            if not isinstance(model, dict) or (models and model.get("id") not in models):
                continue
            length = model.get("context_length")
            if isinstance(length, int) and length > 0:
                lengths.append(length)
    runtime = runtimes.pop() if len(runtimes) == 1 else None
    return (min(lengths) if lengths else None), (runtime or None)
