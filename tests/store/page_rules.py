"""The isolation rules of docs/format.md, written from the page alone (its sections "The response
text", "Stripping a proof", "The verifier's parsed output", "Confirmed findings", "Anonymised
proofs", "Pooled proofs", "Final checks and pairwise selection" and the policy table), with the
standard library only: no module of ``solver`` is imported here, so this is a second reading of
the page, not a copy of the audit."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POLICY: dict[str, set[str]] = {
    "generator": {"problem_statement"},
    "verifier": {"problem_statement", "proof_text"},
    "verifier:check": {"problem_statement", "proof_text"},
    "reviewer": {"problem_statement", "proof_text", "verification_report"},
    "generator:improve": {"problem_statement", "proof_text"},
    "reviser": {"confirmed_findings", "problem_statement", "proof_text"},
    "reviser:recombine": {"pooled_proofs", "problem_statement"},
    "grader": {"problem_statement", "proof_text"},
    "grader:evaluation": {
        "grading_guidelines",
        "marking_scheme",
        "problem_statement",
        "proof_text",
        "reference_solution",
    },
    "grader:rejudge": {
        "grader_judgments",
        "grading_guidelines",
        "marking_scheme",
        "problem_statement",
        "proof_text",
        "reference_solution",
    },
    "grader:reconcile": {
        "grader_judgments",
        "grading_guidelines",
        "problem_statement",
        "proof_text",
        "reference_solution",
    },
    "rubric_writer": {"problem_statement", "reference_solution"},
    "selector": {"anonymised_proofs", "problem_statement"},
}
REFERENCE = {"reference_solution", "grading_guidelines", "marking_scheme"}
FROM_RESPONSE = {"proof_text", "verification_report", "marking_scheme", "grader_judgments"}
TOOL_REASONS = {"tool_calls", "function_call", "tool_use"}


def h(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ the response text


def _values(data: bytes) -> list[Any]:
    """One data field: one JSON value, or several back to back with whitespace between."""
    text, decoder, values, at = data.decode("utf-8"), json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at == len(text):
            return values
        value, at = decoder.raw_decode(text, at)
        values.append(value)


def _sse_data(raw: bytes) -> list[bytes]:
    text = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    out = []
    for block in text.split(b"\n\n"):
        data = []
        for line in block.split(b"\n"):
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if name == b"data":
                data.append(value.removeprefix(b" "))
        if data:
            out.append(b"\n".join(data))
    return out


@dataclass
class Pieces:
    items: list[tuple[str, str]] = field(default_factory=list)  # ("T" | "R", text)
    finish: str | None = None

    def add(self, kind: str, text: object) -> None:
        if text:
            self.items.append((kind, str(text)))


def _chat(objects: list[Any], pieces: Pieces) -> None:
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        choices = obj.get("choices")
        if not choices:
            continue
        choice = choices[0]
        delta = choice.get("delta") or choice.get("message")
        if delta:
            pieces.add("R", delta.get("reasoning_content") or delta.get("reasoning"))
            pieces.add("T", delta.get("content"))
        if choice.get("finish_reason") and pieces.finish is None:
            pieces.finish = choice["finish_reason"]


def _responses_end(response: dict[str, Any], streamed: bool, pieces: Pieces) -> None:
    if not streamed:
        for item in response.get("output") or []:
            if item.get("type") == "reasoning":
                parts = (item.get("content") or []) + (item.get("summary") or [])
                pieces.add("R", "".join(str(p.get("text") or "") for p in parts))
            elif item.get("type") == "message":
                for part in item.get("content") or []:
                    pieces.add("T", part.get("text"))
    status = response.get("status")
    pieces.finish = pieces.finish or (
        "stop" if status not in ("failed", "cancelled", "incomplete") else status
    )


def _responses(objects: list[Any], pieces: Pieces) -> None:
    streamed = False
    for obj in objects:
        kind = obj.get("type")
        if kind == "response.output_text.delta":
            streamed = True
            pieces.add("T", obj.get("delta"))
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            streamed = True
            pieces.add("R", obj.get("delta"))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            _responses_end(obj.get("response") or {}, streamed, pieces)
            return


def _anthropic_block(block: dict[str, Any], pieces: Pieces) -> None:
    if block.get("type") == "text":
        pieces.add("T", block.get("text"))
    elif block.get("type") == "thinking":
        pieces.add("R", block.get("thinking"))


def _anthropic(objects: list[Any], pieces: Pieces) -> None:
    for obj in objects:
        kind = obj.get("type")
        if kind == "content_block_start":
            _anthropic_block(obj.get("content_block") or {}, pieces)
        elif kind == "content_block_delta":
            delta = obj.get("delta") or {}
            if delta.get("type") == "text_delta":
                pieces.add("T", delta.get("text"))
            elif delta.get("type") == "thinking_delta":
                pieces.add("R", delta.get("thinking"))
        elif kind == "message_delta":
            stop = (obj.get("delta") or {}).get("stop_reason")
            if stop and pieces.finish is None:
                pieces.finish = stop
        elif kind == "message_stop":
            return


def decode_pieces(api: str, raw: bytes, stream: bool) -> Pieces:
    first = raw.lstrip(b" \t\n\r\x0b\x0c")[:1]
    is_body = first in (b"{", b"[")
    pieces = Pieces()
    if is_body:
        body = json.loads(raw)
        if api == "chat":
            _chat([body], pieces)
        elif api == "responses":
            _responses_end(body, False, pieces)
        else:
            for block in body.get("content") or []:
                _anthropic_block(block, pieces)
            pieces.finish = body.get("stop_reason")
        return pieces
    objects: list[Any] = []
    for data in _sse_data(raw):
        if data == b"[DONE]" and api in ("chat", "responses"):
            break
        objects.extend(v for v in _values(data) if isinstance(v, dict))
    {"chat": _chat, "responses": _responses, "anthropic": _anthropic}[api](objects, pieces)
    return pieces


def _orphan_split(text: str) -> tuple[str, str] | None:
    """(reasoning, text) when ``text`` has a ``</think>`` with no ``<think>`` before it."""
    head, tag, tail = text.partition("</think>")
    return (head, tail) if tag and "<think>" not in head else None


def response_text(api: str, raw: bytes, params: dict[str, Any]) -> str:
    pieces = decode_pieces(api, raw, bool(params.get("stream", True)))
    items, reasoning_param = pieces.items, params.get("reasoning")
    if api == "chat":
        first_r = next((i for i, (k, _) in enumerate(items) if k == "R"), len(items))
        t_text, rest = "".join(t for _, t in items[:first_r]), items[first_r:]
        lead = t_text.lstrip()
        new: list[tuple[str, str]] | None = None
        if lead.startswith("<think>"):
            inner, tag, tail = lead[len("<think>") :].partition("</think>")
            new = [("R", inner)] + ([("T", tail)] if tag else [])
        elif reasoning_param is True and (split := _orphan_split(t_text)) is not None:
            new = [("R", split[0]), ("T", split[1])]
        if new is not None:
            items = [(k, t) for k, t in new if t] + rest
    texts = [t for k, t in items if k == "T"]
    reasonings = [t for k, t in items if k == "R"]
    text, reasoning = "".join(texts), "".join(reasonings)
    if not texts and reasonings and pieces.finish not in TOOL_REASONS:
        text = reasoning
    if not reasoning and reasoning_param is not False:
        split = _orphan_split(text)
        if split is not None:
            text = split[1]
    return text


# ------------------------------------------------------------------ stripping a proof

_I = re.IGNORECASE


def strip_thinking(text: str) -> str:
    text = re.sub(r"<think(?:ing)?>.*?</think(?:ing)?>", "", text, flags=_I | re.DOTALL)
    closes = list(re.finditer(r"</think(?:ing)?>", text, _I))
    if closes:
        text = text[closes[-1].end() :]
    opened = re.search(r"<think(?:ing)?>", text, _I)
    return text[: opened.start()] if opened else text


HEADING = re.compile(
    r"^[ \t]{0,3}(?:#{1,3}[ \t]+(?P<hash>[^\n]{1,120}?)[ \t#]*"
    r"|\*\*(?P<bold>[^*\n]{1,80})\*\*[ \t]*:?[ \t]*)$",
    re.MULTILINE,
)
SECTIONS = (
    ("self", r"^(self[- ]?(assessment|evaluation|check|review)|confidence)"),
    ("responses", r"^(responses?|reply|replies)( to (the )?(confirmed )?findings?)?$"),
    ("answer", r"^(final )?answer$"),
    ("proof", r"^((complete |full |detailed |revised )?(proof|solution))$"),
)


def _section(title: str) -> str | None:
    words = re.sub(r"[^a-z \-]", "", title.lower().replace("_", " ")).strip()
    return next((name for name, pattern in SECTIONS if re.search(pattern, words)), None)


def stripped_proof(text: str) -> str:
    visible = strip_thinking(text)
    parts: list[tuple[str | None, str]] = []
    current: str | None = None
    start = 0
    for match in HEADING.finditer(visible):
        section = _section(match.group("hash") or match.group("bold") or "")
        if section is None:
            continue
        parts.append((current, visible[start : match.start()]))
        current, start = section, match.end()
    parts.append((current, visible[start:]))
    kept = [(s, t.strip("\n")) for s, t in parts if t.strip()]

    def joined(which: str | None) -> str:
        return "\n\n".join(t.strip() for s, t in kept if s == which).strip()

    body = joined("proof") if any(s == "proof" for s, _ in kept) else joined(None)
    answer = joined("answer")
    shown = f"## Proof\n\n{body}" if body else ""
    return f"{shown}\n\n## Final answer\n\n{answer}".strip() if answer else shown


# ------------------------------------------------------------------ the verifier's output


def _latex(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\f", "\\f").replace("\b", "\\b")
    if isinstance(value, list):
        return [_latex(v) for v in value]
    if isinstance(value, dict):
        return {k: _latex(v) for k, v in value.items()}
    return value


def _candidate(s: str) -> Any:
    if len(s) > 200_000:
        return None
    for attempt in (s, None):
        if attempt is None:
            attempt = re.sub(r'\\(?=[^"\\/bfnrtu])|\\(?=u(?![0-9a-fA-F]{4}))', r"\\\\", s)
            attempt = re.sub(r",(\s*[}\]])", r"\1", attempt)
        try:
            return _latex(json.loads(attempt))
        except (ValueError, RecursionError):
            continue
    return None


def normalised(obj: dict[Any, Any]) -> dict[str, Any]:
    return {str(k).strip().lower().replace(" ", "_").replace("-", "_"): v for k, v in obj.items()}


def find_object(visible: str, keys: set[str]) -> dict[str, Any] | None:
    def good(value: Any) -> bool:
        return isinstance(value, dict) and bool(keys & set(normalised(value)))

    fences = re.findall(
        r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n(.*?)```", visible, re.DOTALL
    )[-50:]
    for block in reversed(fences):
        value = _candidate(block.strip())
        if good(value):
            return value  # type: ignore[no-any-return]
    positions = [i for i, ch in enumerate(visible) if ch == "{"][-200:]
    for at in reversed(positions):
        try:
            value = _latex(json.JSONDecoder().raw_decode(visible, at)[0])
        except (ValueError, RecursionError):
            continue
        if good(value):
            return value  # type: ignore[no-any-return]
    end = visible.rfind("}")
    starts = [m.start() for m in re.finditer(r'\{\s*"', visible[max(0, end - 200_000) :])]
    offset = max(0, end - 200_000)
    for start in reversed([s + offset for s in starts][-20:]):
        if start >= end:
            continue
        value = _candidate(visible[start : end + 1])
        if good(value):
            return value  # type: ignore[no-any-return]
    return None


PASS = {"pass", "passed", "correct", "valid", "accept", "accepted", "yes", "true"}
FAIL = {"fail", "failed", "incorrect", "invalid", "reject", "rejected", "no", "false"}


def _severity(value: Any) -> str:
    text = str(value).strip().lower()
    if text.startswith("minor") or text in {"low", "trivial", "cosmetic", "presentation"}:
        return "minor"
    return "critical" if text.startswith("crit") or "error" in text else "major"


def _stated(value: Any) -> str:
    if value is True or value is False:
        return "pass" if value else "fail"
    runs = re.findall(r"[a-z]+", str(value).lower())
    if not runs:
        return "missing"
    if len(runs) == 1 and runs[0] in PASS:
        return "pass"
    return "fail" if PASS & set(runs) or FAIL & set(runs) or runs[0] == "not" else "missing"


def _findings(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list):
        return []
    items = [normalised(item) for item in raw if isinstance(item, dict)]

    def given(item: dict[str, Any]) -> str:
        return str(item.get("id") or "").strip()[:40]

    explicit = {given(item) for item in items}
    assigned: set[str] = set()
    out = []
    for number, item in enumerate(items, start=1):
        ident = given(item)
        if not ident:
            k = number
            while f"F{k}" in explicit or f"F{k}" in assigned:
                k += 1
            ident = f"F{k}"
        while ident in assigned:
            ident += "'"
        assigned.add(ident)

        def first(*names: str, item: dict[str, Any] = item) -> str:
            return str(next((item[n] for n in names if n in item), "")).strip()

        out.append(
            {
                "id": ident,
                "location": first("location", "quote", "where"),
                "explanation": first("explanation", "issue", "description"),
                "severity": _severity(
                    next((item[n] for n in ("severity", "class") if n in item), "major")
                ),
            }
        )
    return out


def verifier_report(text: str) -> str:
    found = find_object(strip_thinking(text), {"verdict", "findings"})
    findings: list[dict[str, str]] = []
    verdict = "fail"
    if found is not None:
        data = normalised(found)
        raw = data["findings"] if "findings" in data else data.get("issues", [])
        findings = _findings(raw)
        blocking = any(f["severity"] in ("critical", "major") for f in findings)
        verdict = "pass" if _stated(data.get("verdict", "")) == "pass" and not blocking else "fail"
    if not findings:
        return f"Verdict: {verdict}\n\nNo findings were reported."
    return f"Verdict: {verdict}\n\n" + "\n\n".join(finding_block(f["id"], f) for f in findings)


def finding_block(ident: str, f: dict[str, str]) -> str:
    return (
        f"### Finding {ident} (severity: {f['severity']})\n"
        f"Location: {f['location'] or '(not given)'}\n"
        f"Explanation: {f['explanation'] or '(not given)'}"
    )


def scheme(text: str) -> str | None:
    found = find_object(strip_thinking(text), {"checkpoints"})
    if found is None:
        return None
    entries = normalised(found).get("checkpoints")
    if not isinstance(entries, list) or not 1 <= len(entries) <= 12:
        return None
    checkpoints: list[tuple[str, int, str]] = []
    for entry in entries:
        data = normalised(entry) if isinstance(entry, dict) else {}
        value, points = data.get("points"), None
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                number = 0.0
            points = int(number) if number.is_integer() and 1 <= number <= 7 else None
        item = str(data.get("item", "")).strip()
        if points is None or not item:
            return None
        checkpoints.append((item[:2000], points, str(data.get("partial") or "").strip()[:2000]))
    if sum(points for _, points, _ in checkpoints) != 7:
        return None
    out = []
    for number, (item, points, partial) in enumerate(checkpoints, start=1):
        out.append(f"{number}. ({points} point{'s' if points > 1 else ''}) {item}")
        if partial:
            out.append(f"   Partial credit: {partial}")
    return "\n".join(out)


# ------------------------------------------------------------------ folding the journal

Version = tuple[str, int]
MAKERS = {"generator", "generator:improve", "reviser", "reviser:recombine"}


def version_of(text: str) -> Version | None:
    """A pairwise target's item: a lineage, then ``.v``, then decimal digits; else None."""
    lineage, dot_v, number = text.rpartition(".v")
    if not dot_v or not lineage or not number.isdigit():
        return None
    try:
        return (lineage, int(number))
    except ValueError:  # a digit int refuses, such as a superscript
        return None


class Unreadable(ValueError):
    """A target the page's reading refuses: its input cannot be re-derived."""


def python_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise Unreadable(text) from None


def source_of(target: str, lineage: str) -> Version:
    """What a reviser's (or one pool item's) target names: the lineage before its last
    ``.v`` and the number after it, or, with no ``.v``, the number in ``lineage``."""
    other, dot_v, number = target.rpartition(".v")
    return (other, python_int(number)) if dot_v else (lineage, python_int(target))


@dataclass
class Call:
    data: dict[str, Any]
    status: str = "planned"
    facts: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    parsed_ok: bool = False


@dataclass
class Fold:
    calls: dict[str, Call] = field(default_factory=dict)
    lineages: list[str] = field(default_factory=list)
    proofs: dict[Version, str] = field(default_factory=dict)  # version -> its last proof artifact
    versions: dict[str, list[int]] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def lineage(self, name: str | None) -> None:
        if name is not None and name not in self.lineages:
            self.lineages.append(name)
            self.versions[name] = []

    def apply(self, rtype: str, data: dict[str, Any]) -> None:
        if rtype == "call.planned":
            self.calls[data["call_id"]] = Call(data)
            self.lineage(data.get("lineage"))
            makes_version = data["role"] in MAKERS and data.get("lineage")
            if makes_version and data.get("version") is not None:
                self.versions[data["lineage"]].append(data["version"])
        elif rtype == "call.completed":
            call = self.calls[data["call_id"]]
            call.status, call.facts = "completed", data["facts"]
            call.truncated, call.parsed_ok = data["truncated"], data["parsed_ok"]
        elif rtype in ("call.failed", "call.cancelled"):
            self.calls[data["call_id"]].status = rtype.removeprefix("call.")
        elif rtype == "artifact.put":
            self.artifacts[data["artifact"]] = data
            if (
                data["kind"] == "proof_text"
                and data.get("lineage")
                and data.get("version") is not None
            ):
                self.lineage(data["lineage"])
                self.proofs[(data["lineage"], data["version"])] = data["artifact"]
        elif rtype == "decision" and data.get("lineage"):
            if data["kind"] == "accepted":
                self.accepted[data["lineage"]] = data["version"]
            elif (
                data["kind"] == "unaccepted"
                and self.accepted.get(data["lineage"]) == (data["version"])
            ):
                del self.accepted[data["lineage"]]


def _fold_text(text: str) -> str:
    return " ".join("".join(ch.lower() if ch.isalnum() else " " for ch in text).split())


def _keys(f: dict[str, str]) -> set[str]:
    keys = set()
    if len(e := _fold_text(f["explanation"])) >= 16:
        keys.add("explanation:" + e)
    if len(loc := _fold_text(f["location"])) >= 16:
        keys.add("location:" + loc[:120])
    return keys


RANK = {"minor": 0, "major": 1, "critical": 2}


def findings_of_version(fold: Fold, lineage: str, version: int) -> tuple[str, list[str]]:
    """The confirmed findings of one version, formatted, and its review calls (sorted)."""

    def of(role: str) -> list[Call]:
        return [
            c
            for c in fold.calls.values()
            if c.data["role"] == role
            and c.data.get("lineage") == lineage
            and c.data.get("version") == version
        ]

    reviews: dict[str, Call] = {}
    for c in of("reviewer"):
        reviews[str(c.data.get("target"))] = c  # the last one planned counts
    found: list[dict[str, str]] = []
    verifications = of("verifier") + of("verifier:check")
    for ver in sorted(verifications, key=lambda c: c.data["call_id"]):
        facts = ver.facts
        findings = (
            facts.get("findings", []) if "verdict" in facts and "not_used" not in facts else []
        )
        review = reviews.get(ver.data["call_id"])
        if review is None or review.status == "planned":
            continue
        if review.status != "completed":
            found += [dict(f) for f in findings]
            continue
        rf = review.facts
        usable = "confirmed" in rf and "not_used" not in rf and "verdict" not in rf
        confirmed = set(rf["confirmed"]) if usable else set()
        severity = rf.get("severity", {}) if usable else {}
        found += [
            {**f, "severity": severity.get(f["id"], f["severity"])}
            for f in findings
            if f["id"] in confirmed
        ]
    kept: list[dict[str, str]] = []
    kept_keys: list[set[str]] = []
    for f in found:
        own = _keys(f)
        for i, k in enumerate(kept):
            same = (f["location"].strip(), f["explanation"].strip()) == (
                k["location"].strip(),
                k["explanation"].strip(),
            )
            if own & kept_keys[i] or same:
                if RANK[f["severity"]] > RANK[k["severity"]]:
                    kept[i] = {**k, "severity": f["severity"]}
                kept_keys[i] |= own
                break
        else:
            kept.append(f)
            kept_keys.append(own)
    text = "\n\n".join(finding_block(f"C{n}", f) for n, f in enumerate(kept, start=1))
    return text, sorted(c.data["call_id"] for c in of("reviewer"))


def revised_version(reviser: Call) -> Version | None:
    """The version a reviser call revises: ``int(target)`` of its own lineage, or, for a
    restart from the pool, the ``<lineage>.v<version>`` its target names."""
    target = reviser.data.get("target")
    if not target:
        return None
    try:
        return source_of(target, reviser.data["lineage"])
    except Unreadable:
        return None


def confirmed_findings(fold: Fold, reviser: Call) -> tuple[bytes, str] | None:
    revised = revised_version(reviser)
    if revised is None:
        return None
    text, reviews = findings_of_version(fold, *revised)
    return text.encode(), ",".join(reviews)


def as_list(texts: list[str]) -> bytes:
    return json.dumps(texts, indent=2, ensure_ascii=False).encode()


def declared_pool(fold: Fold, call: Call) -> list[Version] | None:
    """The versions a recombination declares in its target, or None when the declaration
    breaks the page's rules (2 to 4, distinct lineages other than its own, each with a proof)."""
    versions: list[Version] = []
    for item in str(call.data.get("target") or "").split(","):
        if not item.strip():
            continue
        try:
            source = source_of(item.strip(), "")
        except Unreadable:
            return None
        if source[0]:  # an item without a lineage is skipped
            versions.append(source)
    lineages = {v[0] for v in versions}
    if (
        not 2 <= len(versions) <= 4
        or len(lineages) != len(versions)
        or call.data.get("lineage") in lineages
        or any(v not in fold.proofs for v in versions)
    ):
        return None
    return versions


def pooled_proofs(fold: Fold, call: Call, read: Any) -> tuple[bytes, str] | None:
    versions = declared_pool(fold, call)
    if versions is None:
        return None
    texts, names, reviews = [], [], []
    for lineage, version in versions:
        name = fold.proofs[(lineage, version)]
        proof = read(fold.artifacts[name]["blob"]["blob"]).decode().strip()
        findings, reviewers = findings_of_version(fold, lineage, version)
        heading = "\n\n### Confirmed findings on this proof\n\n"
        texts.append(proof + heading + (findings or "(no finding was confirmed)"))
        names.append(name)
        reviews += reviewers
    return as_list(texts), ",".join(names + reviews)


def final_versions(fold: Fold) -> list[Version]:
    """The final candidates: the graded versions, else each lineage's accepted or last."""
    graded: list[Version] = []
    for call in fold.calls.values():
        d = call.data
        if (
            d.get("phase") == "grade"
            and d.get("lineage") is not None
            and d.get("version") is not None
        ):
            v = (d["lineage"], d["version"])
            known = v[1] in fold.versions.get(v[0], []) or v in fold.proofs
            if known and v not in graded:
                graded.append(v)
    if graded:
        return sorted(graded, key=lambda v: fold.lineages.index(v[0]))
    finals = []
    for name in fold.lineages:
        if name in fold.accepted:
            finals.append((name, fold.accepted[name]))
            continue
        with_proof = [n for (ln, n) in fold.proofs if ln == name]
        if with_proof:
            finals.append((name, max(with_proof)))
    return finals


def grade_rank(fold: Fold, v: Version) -> int:
    """The lower median of the version's usable grades (``grade.L.vN`` and every
    ``grade.L.vN.<n>``), or -1 when it has none."""
    first = f"grade.{v[0]}.v{v[1]}"
    scores = []
    for call_id, call in fold.calls.items():
        if call_id != first and not re.fullmatch(re.escape(first) + r"\.[0-9]+", call_id):
            continue
        if call.status != "completed" or call.truncated or not call.parsed_ok:
            continue
        f = call.facts
        plain = not {"not_used", "verdict", "confirmed"} & set(f)
        score = f.get("score") if plain else None
        if isinstance(score, int) and not isinstance(score, bool):
            scores.append(score)
    return sorted(scores)[(len(scores) - 1) // 2] if scores else -1


def pairwise_pair(fold: Fold, call: Call) -> list[Version] | None:
    """The two versions a pairwise selector call names in its target, or None when they are
    not two different final candidates with proofs."""
    items = [version_of(item) for item in str(call.data.get("target") or "").split(",")]
    finals = final_versions(fold)
    pair = [v for v in items if v is not None and v in finals and v in fold.proofs]
    return pair if len(pair) == len(items) == 2 and pair[0] != pair[1] else None


def anonymised_proofs(
    fold: Fold, call: Call, manifest: dict[str, Any], read: Any
) -> tuple[bytes, str] | None:
    if call.data.get("variant") == "pairwise":
        pool = pairwise_pair(fold, call)
        if pool is None:
            return None
    else:
        finals = final_versions(fold)
        accepted = [v for v in finals if fold.accepted.get(v[0]) == v[1]]
        if accepted:
            pool = accepted
        else:
            best = max((grade_rank(fold, v) for v in finals), default=0)
            pool = [v for v in finals if grade_rank(fold, v) == best]
        seed = f"{manifest['config']['resolved']['seed']}:{manifest['problem']['digest']}"
        random.Random(seed).shuffle(pool)
    names = [fold.proofs[v] for v in pool]
    texts = [read(fold.artifacts[n]["blob"]["blob"]).decode() for n in names]
    return as_list(texts), ",".join(names)


# ------------------------------------------------------------------ the isolation verdicts

DERIVED = {
    "confirmed_findings": ".findings",
    "pooled_proofs": ".pool",
    "anonymised_proofs": ".proofs",
}


@dataclass
class Verdicts:
    problems: list[str] = field(default_factory=list)  # "seq N: what"
    contexts: int = 0
    from_responses: dict[str, int] = field(default_factory=dict)  # kind -> artifacts checked
    derived: dict[str, int] = field(default_factory=dict)


def isolation(run: Path) -> Verdicts:
    manifest = json.loads((run / "MANIFEST.json").read_bytes())
    records = [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]

    def read(digest: str) -> bytes:
        hex_ = digest.removeprefix("sha256:")
        return (run / "blobs" / "sha256" / hex_[:2] / hex_).read_bytes()

    out = Verdicts()
    for role, kinds in (manifest.get("roles", {}).get("policy") or {}).items():
        if not set(kinds) <= POLICY.get(role, set()):
            out.problems.append(f"MANIFEST.json: policy widens {role}")
    started = {
        (r["data"]["call_id"], r["data"]["attempt"]): r["data"]
        for r in records
        if r["type"] == "llm.started"
    }
    completed: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["type"] == "llm.completed":
            completed.setdefault(r["data"]["call_id"], r["data"])
    fold = Fold()
    solve_ended = False
    for r in records:
        seq, rtype, data = r["seq"], r["type"], r["data"]

        def problem(what: str, seq: int = seq) -> None:
            out.problems.append(f"seq {seq}: {what}")

        if rtype == "decision" and data["kind"] == "phase" and data.get("phase") != "solve":
            solve_ended = True
        elif rtype == "artifact.put":
            kind, content = data["kind"], read(data["blob"]["blob"])
            if kind in FROM_RESPONSE and data["producer"] in fold.calls:
                out.from_responses[kind] = out.from_responses.get(kind, 0) + 1
                done = completed.get(data["producer"])
                if done is None:
                    problem(f"{data['artifact']} has no response")
                else:
                    params = started[(done["call_id"], done["attempt"])]
                    text = response_text(
                        params["api"], read(done["response"]["blob"]), params["params"]
                    )
                    derived: str | None = {
                        "proof_text": stripped_proof,
                        "verification_report": verifier_report,
                        "marking_scheme": scheme,
                        "grader_judgments": lambda t: (
                            strip_thinking(t).strip() or "(empty judgment)"
                        ),
                    }[kind](text)
                    if derived is None or derived.encode() != content:
                        problem(f"{data['artifact']} is not derived from its response")
            elif kind in DERIVED:
                out.derived[kind] = out.derived.get(kind, 0) + 1
                call = fold.calls.get(data["artifact"].removesuffix(DERIVED[kind]))
                if call is None or not data["artifact"].endswith(DERIVED[kind]):
                    problem(f"{data['artifact']} names no call")
                else:
                    made = (
                        confirmed_findings(fold, call)
                        if kind == "confirmed_findings"
                        else pooled_proofs(fold, call, read)
                        if kind == "pooled_proofs"
                        else anonymised_proofs(fold, call, manifest, read)
                    )
                    if made is None:
                        problem(f"{data['artifact']} cannot be derived from its call's target")
                    elif h(made[0]) != data["blob"]["blob"] or made[1] != data["producer"]:
                        problem(f"{data['artifact']} is not what the journal derives")
        elif rtype == "context.built":
            out.contexts += 1
            call_id, role = data["call_id"], data["role"]
            inputs = json.loads(read(data["inputs"]["blob"]))
            phase = fold.calls[call_id].data.get("phase") if call_id in fold.calls else None
            for name in sorted(set(inputs) | set(data["links"])):
                links = data["links"].get(name, [])
                for link in links:
                    kind = link["kind"]
                    source = fold.artifacts.get(link["artifact"])
                    if kind not in POLICY.get(role, set()):
                        problem(f"{call_id}: {role} may not see {kind}")
                    if kind in DERIVED and link["artifact"] != call_id + DERIVED[kind]:
                        problem(f"{call_id}: {kind} of another call")
                    if (
                        source is None
                        or source["kind"] != kind
                        or source["blob"]["blob"] != link["blob"]
                    ):
                        problem(f"{call_id}: {link['artifact']} is not a recorded artifact")
                    if kind in REFERENCE and not (solve_ended and phase == "evaluate"):
                        problem(f"{call_id}: {kind} before the solve phase ended")
                value = inputs.get(name)
                if isinstance(value, str):
                    ok = len(links) == 1 and h(value.encode()) == links[0]["blob"]
                elif isinstance(value, list):
                    whole = False
                    if len(links) == 1:
                        try:
                            whole = json.loads(read(links[0]["blob"])) == value
                        except ValueError:
                            whole = False
                    ok = whole or [h(v.encode()) for v in value] == [x["blob"] for x in links]
                else:
                    ok = value is None and not links
                if not ok:
                    problem(f"{call_id}: input {name} differs from its links")
        fold.apply(rtype, data)
    return out
