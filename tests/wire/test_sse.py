"""SSE framing over raw bytes: every split point and line ending gives the same events, and
a large event fed in many reads is held as pieces until its end arrives."""

from __future__ import annotations

import pytest

from solver.wire.sse import SSEDecoder

WIRE = (
    b": keep-alive\n\n"
    b'event: delta\ndata: {"a": 1}\n\n'
    b"data: one\ndata: two\n\n"
    b'data: {"b": "\xe4\xbd\xa0"}\n\n'
    b"\n\n"
    b"data: [DONE]\n\n"
)
EVENTS = [("delta", b'{"a": 1}'), (None, b"one\ntwo"), (None, b'{"b": "\xe4\xbd\xa0"}'),
          (None, b"[DONE]")]  # fmt: skip


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_split_and_line_ending_gives_the_same_events(ending: bytes) -> None:
    wire = WIRE.replace(b"\n", ending)
    for cut in range(len(wire) + 1):
        for second in (cut, min(cut + 3, len(wire))):
            decoder = SSEDecoder()
            got = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:second])
            got += decoder.feed(wire[second:]) + decoder.close()
            assert got == EVENTS, (ending, cut, second)


def test_a_large_event_is_held_in_pieces_and_delivered_once() -> None:
    payload = b"x" * (4 << 20)
    wire = b"data: " + payload + b"\n\ndata: tail\n\n"
    decoder = SSEDecoder()
    got = []
    for start in range(0, len(wire), 1 << 16):
        got += decoder.feed(wire[start : start + (1 << 16)])
        if not got:
            assert decoder.pending == min(start + (1 << 16), len(wire))
    assert got == [(None, payload), (None, b"tail")] and decoder.pending == 0


def test_an_unterminated_last_event_is_delivered_at_eof() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: [DONE]\r") == [(None, b"a")]
    assert decoder.close() == [(None, b"[DONE]")]
