"""The page's derivation rules (tests/store/page_rules.py, written from docs/format.md alone)
give what the project's code gives, on texts and streams chosen to reach each rule's corners.
This is the one place those rules are checked against the code: the verifier test checks them
against real runs, where only the ordinary paths occur."""

from __future__ import annotations

import json

import pytest

from solver import roles
from solver.llm import Folder, StreamDecoder
from solver.roles import rubric_writer, verifier

from . import page_rules

PROOFS = [
    "## Proof\n\nBody.\n\n## Final answer\n\n2\n\n## Self-assessment\n\nStatus: complete.",
    "<think>plan</think>\n## Proof\nA\n### Case 1\nB\n## Answer\nNot applicable",
    "Preamble only, no headings at all.\n\n**Self-check:** fine",
    "reasoning</think>**Complete proof**\n\nX\n\n**Final Answer:**\n\n  7  ",
    "## Solution\nS <THINKING>hidden",
    "  ### Revised   Proof ##\n\nR\n\n## Response to the confirmed findings\n\nF1 fixed",
    "## Proof\n\n\n\n## Final answer\n\n",
    "# Proof\nfirst\n# Proof\nsecond\n#### Proof\nstill second",
    "<think>a</think>b</thinking>c<think>d",
    "## Self_Assessment 2\nx\n## final-answer\ny\n## Proof:\nz",
]

REPORTS = [
    '```json\n{"findings": [], "verdict": "pass"}\n```',
    'Text {"verdict": "pass with reservations", "findings": []}',
    '```\n{"Findings": [{"location": "l", "severity": "Minor issue", "explanation": "e"},'
    ' {"id": "F1", "severity": "crit"}], "verdict": "pass"}\n```',
    '{"issues": [{"quote": "q", "issue": "i", "class": "error"}, {"id": "A"}, {"id": "A"}],'
    ' "verdict": false}',
    '```json\n{"verdict": "pass", "findings": [{"explanation": "\\frac{1}{2} is \\(x\\)",}]}\n```',
    "The verdict: PASS. No JSON here.",
    '<think>{"verdict": "fail"}</think> Verdict - fail',
    '{"verdict": "not correct", "findings": "none"}',
    '{"verdict": 1, "findings": [{"id": 0, "location": null, "severity": "low"}]}',
    '{"verdict": true, "findings": [{"id": "F2"}, {}, {"id": "F1"}]}',
    '```js\n{"verdict": "pass"}\n```\nlater {"verdict": "fail", "findings": []} tail',
]

SCHEMES = [
    '{"checkpoints": [{"item": "a", "points": 3}, {"item": "b", "points": "4", "partial": "x"}]}',
    '{"checkpoints": [{"item": "a", "points": 7.0, "partial": null}]}',
    '{"checkpoints": [{"item": "a", "points": 3}]}',
    '{"checkpoints": [{"item": " ", "points": 7}]}',
    '{"Checkpoints": [{"Item": "a", "Points": " 7 "}]}',
]


@pytest.mark.parametrize("text", PROOFS)
def test_the_page_s_stripped_proof_is_the_code_s(text: str) -> None:
    assert page_rules.stripped_proof(text) == roles.extract_proof(text).proof
    assert page_rules.strip_thinking(text) == roles.strip_thinking(text)


@pytest.mark.parametrize("text", REPORTS)
def test_the_page_s_report_is_the_code_s(text: str) -> None:
    assert page_rules.verifier_report(text) == verifier.format_report(verifier.parse(text))


@pytest.mark.parametrize("text", SCHEMES)
def test_the_page_s_scheme_is_the_code_s(text: str) -> None:
    output = rubric_writer.parse(text)
    expected = rubric_writer.format_scheme(output) if output.parsed else None
    assert page_rules.scheme(text) == expected


def sse(values: list[object], done: bool = True) -> bytes:
    out = b"".join(b"data: " + json.dumps(v).encode() + b"\n\n" for v in values)
    return out + (b"data: [DONE]\n\n" if done else b"")


def chat(pieces: list[tuple[str, str]]) -> bytes:
    chunks: list[object] = [
        {"choices": [{"delta": {"reasoning_content" if k == "R" else "content": t}}]}
        for k, t in pieces
    ]
    return sse([*chunks, {"choices": [{"delta": {}, "finish_reason": "stop"}]}])


def responses(pieces: list[tuple[str, str]]) -> bytes:
    kinds = {"T": "response.output_text.delta", "R": "response.reasoning_text.delta"}
    events: list[object] = [{"type": kinds[k], "delta": t} for k, t in pieces]
    done = {"type": "response.completed", "response": {"status": "completed", "output": []}}
    return sse([*events, done], done=False)


def anthropic(pieces: list[tuple[str, str]]) -> bytes:
    events: list[object] = [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": t}
            if k == "T"
            else {"type": "thinking_delta", "thinking": t},
        }
        for k, t in pieces
    ]
    end = [
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    return sse([*events, *end], done=False)


STREAMS: list[list[tuple[str, str]]] = [
    [("T", "<think>r</think>"), ("T", "  answer")],
    [("T", "  <thi"), ("T", "nk>inner"), ("T", " more</th"), ("T", "ink>after")],
    [("T", "<think>never closed")],
    [("T", "head</think>"), ("T", "tail")],
    [("T", "proof text</think>")],
    [("T", "a <think> b </think> c")],
    [("R", "channel"), ("T", "<think>x</think>y")],
    [("T", "<think>in"), ("R", "channel"), ("T", "out</think>z")],
    [("T", "  "), ("R", "only reasoning")],
    [("R", "only reasoning")],
    [("T", "</think>x</think>y")],
    [("T", "<thinking>tag</think>after")],
]


@pytest.mark.parametrize("reasoning", [True, None, False])
@pytest.mark.parametrize("pieces", STREAMS)
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_page_s_response_text_is_the_live_client_s(
    api: str, pieces: list[tuple[str, str]], reasoning: bool | None
) -> None:
    raw = {"chat": chat, "responses": responses, "anthropic": anthropic}[api](pieces)
    decoder = StreamDecoder(api, reasoning=reasoning)  # type: ignore[arg-type]
    folder = Folder(reasoning=reasoning)
    for event in [*decoder.feed(raw), *decoder.close()]:
        folder.add(event)
    params = {"stream": True, "reasoning": reasoning}
    assert page_rules.response_text(api, raw, params) == folder.completion().text


BODIES = {
    "chat": {
        "choices": [
            {
                "message": {"reasoning_content": "r", "content": "x</think>y"},
                "finish_reason": "stop",
            }
        ]
    },
    "responses": {
        "status": "completed",
        "output": [
            {"type": "reasoning", "summary": [{"text": "s"}], "content": [{"text": "c"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "answer"}]},
        ],
    },
    "anthropic": {
        "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a</think>b"}],
        "stop_reason": "end_turn",
    },
}


@pytest.mark.parametrize("reasoning", [True, None, False])
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_page_s_body_text_is_the_live_client_s(api: str, reasoning: bool | None) -> None:
    raw = json.dumps(BODIES[api]).encode()
    folder = Folder(reasoning=reasoning)
    for event in StreamDecoder(api, reasoning=reasoning).body(raw):  # type: ignore[arg-type]
        folder.add(event)
    params = {"stream": False, "reasoning": reasoning}
    assert page_rules.response_text(api, raw, params) == folder.completion().text
