"""Every catalogue case decodes to the right canonical result, whole and split anywhere."""

from __future__ import annotations

import pytest

from solver.wire import (
    Finish,
    StreamDecoder,
    StreamError,
    Usage,
    decode_stream,
    fold_events,
)
from tests.wire.catalogue import ALL_CASES, Case

IDS = [case.code for case in ALL_CASES]


def check(case: Case, events: list[object]) -> None:
    completion = fold_events(events)  # type: ignore[arg-type]
    assert completion.text == case.text
    assert completion.reasoning == case.reasoning
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == case.tools
    terminal = events[-1]
    if case.error_kind is not None:
        assert isinstance(terminal, StreamError)
        assert terminal.kind == case.error_kind
    else:
        assert isinstance(terminal, Finish)
        assert terminal.reason == case.finish
    assert completion.finish_reason == case.finish
    # exactly one terminal, and it is last
    assert sum(isinstance(e, Finish | StreamError) for e in events) == 1
    if case.usage is not None:
        assert completion.usage == case.usage
    usages = [e for e in events if isinstance(e, Usage)]
    assert len(usages) <= 1


@pytest.mark.parametrize("case", ALL_CASES, ids=IDS)
def test_case_whole(case: Case) -> None:
    check(case, list(decode_stream(case.api, [case.raw])))


@pytest.mark.parametrize("case", ALL_CASES, ids=IDS)
def test_case_split_at_every_byte_boundary(case: Case) -> None:
    whole = list(decode_stream(case.api, [case.raw]))
    for cut in range(1, len(case.raw)):
        split = list(decode_stream(case.api, [case.raw[:cut], case.raw[cut:]]))
        assert split == whole, f"differs when split at byte {cut}"


@pytest.mark.parametrize("case", ALL_CASES, ids=IDS)
def test_case_one_byte_at_a_time(case: Case) -> None:
    whole = list(decode_stream(case.api, [case.raw]))
    assert list(decode_stream(case.api, [bytes([b]) for b in case.raw])) == whole


def test_normalised_cases_are_counted() -> None:
    by_code = {case.code: case for case in ALL_CASES}
    expectations = {
        "E01": "E01_usage_tail",
        "E03": "E03_duplicate_finish",
        "E06": "E06_eof_after_finish",
        "E07": "E07_eof_without_finish",
        "E08": "E08_done_without_finish",
        "E14": "E14_empty_tool_calls",
        "E15": "E15_empty_finish",
        "E16": "E16_usage_every_chunk",
        "E17": "E17_reasoning_alias",
        "E18": "E18_function_call",
        "E19": "E19_abort",
        "E22": "E22_reasoning_promoted",
        "E24": "E24_parser_leak",
        "E30": "E30_tool_without_index",
        "E32": "E32_tool_call_lost",
        "E36": "E36_error_in_stream",
        "think-tags": "think_tags",
    }
    for code, counted in expectations.items():
        decoder = StreamDecoder(by_code[code].api)
        decoder.feed(by_code[code].raw)
        decoder.close()
        assert counted in decoder.cases, code


def test_in_stream_error_retryability_follows_its_status() -> None:
    by_code = {case.code: case for case in ALL_CASES}
    server = list(decode_stream("chat", [by_code["E36"].raw]))[-1]
    client = list(decode_stream("chat", [by_code["E36-bare"].raw]))[-1]
    assert isinstance(server, StreamError) and server.retryable and server.status == 503
    assert isinstance(client, StreamError) and not client.retryable


def test_server_id_is_kept() -> None:
    by_code = {case.code: case for case in ALL_CASES}
    for code, expected in (
        ("E01", "chatcmpl-1"),
        ("anthropic-full", "msg_1"),
        ("responses-full", "resp_1"),
    ):
        decoder = StreamDecoder(by_code[code].api)
        decoder.feed(by_code[code].raw)
        assert decoder.server_id == expected
