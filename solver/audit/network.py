"""Audit check ``network``: the peer address of every connection recorded is an allow-listed
endpoint (for a run on the embedded model, or the port its session's probe reached); a role
with an endpoint of its own (graders of another model family) has it allow-listed, and its
calls' connections went there."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from solver.audit.base import AuditContext, Check, capped
from solver.audit.records import records_of, row_about


def _host_port(text: str) -> tuple[str, int] | None:
    """``host:port``, ``ip:port`` or ``[ipv6]:port`` (an IPv6 peer may come without brackets)."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]").lower(), int(port)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _peer_allowed(peer: tuple[str, int], allowed: tuple[str, int]) -> bool | None:
    """True or False when the recorded peer can be judged offline; None when the allow-list
    names a host by a DNS name other than localhost, whose addresses are not recorded."""
    address, port = peer
    host, allowed_port = allowed
    peer_ip = _ip(address)
    if port != allowed_port or peer_ip is None:
        return False
    allowed_ip = _ip(host)
    if allowed_ip is not None:
        return peer_ip == allowed_ip
    if host == "localhost":
        return peer_ip.is_loopback
    return None


def _moved_local_ports(
    ctx: AuditContext, allowed: list[tuple[str, int]]
) -> dict[int, tuple[str, int]]:
    """Session -> the address its ``endpoint.probed`` reached, for a run on the embedded
    model only: `solver local up` picks a new port each time and resume follows it. The
    host must stay an allow-listed one; only the port may move."""
    endpoint = ctx.manifest.get("endpoint")
    if not isinstance(endpoint, dict) or endpoint.get("source") != "local":
        return {}
    hosts = {host for host, _port in allowed}
    moved: dict[int, tuple[str, int]] = {}
    for rec in records_of(ctx, "endpoint.probed"):
        try:
            parts = urlsplit(str(rec.data.get("url") or ""))
            host, port = (parts.hostname or "").lower(), parts.port
        except ValueError:
            continue
        if host in hosts and port is not None:
            moved[rec.sess] = (host, port)
    return moved


def _url_host_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return ((parts.hostname or "").lower(), port) if parts.hostname else None


def _routing_rows(ctx: AuditContext, allow_list: list[str]) -> list[Check]:
    """A role served by an endpoint of its own (the manifest's ``role_endpoints``): that
    endpoint is allow-listed, and every connection one of its calls opened went there."""
    declared = ctx.manifest.get("role_endpoints")
    if not isinstance(declared, dict) or not declared:
        return []
    rows: list[Check] = []
    allowed = {p for p in (_host_port(a) for a in allow_list) if p is not None}
    routes: dict[str, tuple[str, int]] = {}
    for role, info in sorted(declared.items()):
        target = _url_host_port(str((info or {}).get("url") or ""))
        if target is None or target not in allowed:
            rows.append(
                Check(
                    name="network",
                    status="fail",
                    detail=f"the endpoint of role {role} is not in the allow-list",
                    where="MANIFEST.json",
                )
            )
            continue
        routes[role] = target
    role_of = {
        str(rec.data.get("call_id")): str(rec.data.get("role"))
        for rec in records_of(ctx, "call.planned")
    }
    for rec in records_of(ctx, "net.connect"):
        role = role_of.get(str(rec.data.get("call_id") or ""))
        target = routes.get(role or "")
        if target is None:
            continue
        peer = _host_port(str(rec.data.get("address") or ""))
        if peer is None or _peer_allowed(peer, target) is False:
            rows.append(
                row_about(
                    ctx,
                    "network",
                    "fail",
                    f"a {role} call connected to {rec.data.get('address')}, not to its "
                    f"role's endpoint {target[0]}:{target[1]}",
                    rec,
                )
            )
    return rows


def _session_endpoints(ctx: AuditContext) -> dict[int, tuple[str, int] | None]:
    """Session -> the endpoint `solver resume --endpoint` moved it to (None when the URL
    recorded does not parse: no connection of that session can then be allowed)."""
    moved: dict[int, tuple[str, int] | None] = {}
    for rec in records_of(ctx, "session.started"):
        url = rec.data.get("endpoint")
        if isinstance(url, str) and url:
            moved[rec.sess] = _url_host_port(url)
    return moved


def check_network(ctx: AuditContext) -> list[Check]:
    """Judged on the peer address each connection reached (what the socket reports), not
    on the host the client meant to reach, which is the same constant in every record."""
    allow_list = [str(a) for a in ctx.manifest.get("network", {}).get("allow", [])]
    allowed = [p for p in (_host_port(a) for a in allow_list) if p is not None]
    moved = _moved_local_ports(ctx, allowed)
    sessions = _session_endpoints(ctx)
    rows: list[Check] = []
    unverifiable = 0
    connects = records_of(ctx, "net.connect")
    for rec in connects:
        address = str(rec.data.get("address") or "")
        peer = _host_port(address)
        session_allowed = [*allowed, moved[rec.sess]] if rec.sess in moved else allowed
        if rec.sess in sessions:  # moved explicitly: held to its own endpoint, and only it
            own = sessions[rec.sess]
            session_allowed = [own] if own is not None else []
        verdicts = [_peer_allowed(peer, a) for a in session_allowed] if peer else []
        if any(v is True for v in verdicts):
            continue
        if any(v is None for v in verdicts):
            unverifiable += 1
            continue
        shown = address or "no peer address recorded"
        rows.append(
            row_about(
                ctx,
                "network",
                "fail",
                f"connection to {shown} (meant for {rec.data.get('host')}:"
                f"{rec.data.get('port')}) is not the allow-listed endpoint",
                rec,
            )
        )
    if unverifiable:
        rows.append(
            Check(
                name="network",
                status="warn",
                detail=f"{unverifiable} connections reached the allow-listed port of a host "
                "named by DNS; which addresses that name had cannot be checked offline",
            )
        )
    rows += _routing_rows(ctx, allow_list)
    calls = records_of(ctx, "llm.started")
    if calls and not connects:
        # keep-alive can carry every call over one connection, but that connection was opened
        # and recorded once; none at all means the evidence is missing, not that all is well
        rows.append(
            Check(
                name="network",
                status="warn",
                detail=f"{len(calls)} model requests but no connection recorded: where they "
                "went cannot be shown",
            )
        )
    if not rows:
        followed = sorted({f"{h}:{p}" for h, p in moved.values()} - set(allow_list))
        also = f" (the embedded model, resumed on {', '.join(followed)})" if followed else ""
        elsewhere = sorted({f"{hp[0]}:{hp[1]}" for hp in sessions.values() if hp is not None})
        if elsewhere:
            also += f" or to the endpoint their session was moved to ({', '.join(elsewhere)})"
        rows.append(
            Check(
                name="network",
                status="pass",
                detail=f"{len(connects)} connections, all to "
                f"{', '.join(sorted(allow_list)) or '-'}{also}",
            )
        )
    return capped("network", rows)
