"""What reaches the upstream: images, tool history, Codex custom tools, forced tool choice,
reasoning toggles; and what comes back for a custom (freeform) tool call."""

from __future__ import annotations

import json
from typing import Any

from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import anthropic_client, openai_client, proxied

PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5Er"
    "kJggg=="
)


def _sent(fake: Any) -> dict[str, Any]:
    return json.loads(fake.requests[-1].body)


def test_anthropic_history_with_images_tools_and_thinking_reaches_a_chat_upstream() -> None:
    with proxied(lambda _: Reply(text="ok"), "chat") as (fake, proxy):
        anthropic_client(proxy).messages.create(
            model="claude-x", max_tokens=100, system="be brief",
            thinking={"type": "enabled", "budget_tokens": 2048},
            tools=[{"name": "look", "input_schema": {"type": "object"}}],
            tool_choice={"type": "tool", "name": "look"},
            messages=[
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": PIXEL}},
                    {"type": "text", "text": "what is this?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should look.", "signature": "sig"},
                    {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"z": 1}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                        {"type": "text", "text": "a pixel"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                     "data": PIXEL}}]}]},
            ],
        )  # fmt: skip
        body = _sent(fake)
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["content"][0]["image_url"]["url"] == f"data:image/png;base64,{PIXEL}"
    assert messages[2]["reasoning_content"] == "I should look."
    assert messages[2]["tool_calls"][0]["function"] == {"name": "look", "arguments": '{"z":1}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "a pixel"}
    assert messages[4]["role"] == "user" and "image_url" in json.dumps(messages[4])
    assert body["tool_choice"] == "required" and [t["function"]["name"] for t in body["tools"]] \
        == ["look"]  # fmt: skip
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["max_tokens"] == 100 and body["stream"] is True


def test_codex_custom_tool_round_trip() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    reply = Reply(
        tool_calls=[("call_p", "apply_patch", json.dumps({"input": patch}))],
        finish_reason="tool_calls",
    )
    with proxied(lambda _: reply, "chat") as (fake, proxy):
        client = openai_client(proxy)
        tools: Any = [{"type": "custom", "name": "apply_patch", "description": "edit files"}]
        history: Any = [
            {"role": "developer", "content": "you are codex"},
            {"role": "user", "content": "add a file"},
            {"type": "reasoning", "id": "rs_1", "summary": [
                {"type": "summary_text", "text": "plan"}]},
            {"type": "custom_tool_call", "call_id": "call_0", "name": "apply_patch",
             "input": "*** Begin Patch\n*** End Patch\n"},
            {"type": "custom_tool_call_output", "call_id": "call_0", "output": "done"},
        ]  # fmt: skip
        with client.responses.stream(model="glm", input=history, tools=tools) as stream:
            for _ in stream:
                pass
            final = stream.get_final_response()
        sent = _sent(fake)
        response = client.responses.create(model="glm", input="again", tools=tools)
    calls = [item for item in final.output if item.type == "custom_tool_call"]
    assert len(calls) == 1 and calls[0].input == patch and calls[0].call_id == "call_p"
    assert [i.type for i in response.output] == ["custom_tool_call"]
    assert sent["tools"][0]["function"]["parameters"]["required"] == ["input"]
    assistant = sent["messages"][2]
    assert assistant["reasoning_content"] == "plan"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {
        "input": "*** Begin Patch\n*** End Patch\n"
    }
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "call_0", "content": "done"}


def test_chat_front_reasoning_effort_and_stop_reach_the_upstream() -> None:
    with proxied(lambda _: Reply(text="ok"), "chat") as (fake, proxy):
        openai_client(proxy).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], reasoning_effort="none",
            stop=["END"], seed=7, temperature=0.2,
        )  # fmt: skip
        body = _sent(fake)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["stop"] == ["END"] and body["seed"] == 7 and body["temperature"] == 0.2
    assert body["max_tokens"] >= 4096  # a generous default when the client sets none (E23)


def test_long_tool_names_are_shortened_upstream_and_restored() -> None:
    from solver.proxy._toolnames import short_name

    long_name = "mcp__a_very_long_server_name_for_testing__and_an_even_longer_tool_name_here"
    short = short_name(long_name)
    assert len(long_name) > 64 >= len(short)
    reply = Reply(tool_calls=[("call_l", short, "{}")], finish_reason="tool_calls")
    with proxied(lambda _: reply, "chat") as (fake, proxy):
        tools: Any = [{"name": long_name, "input_schema": {"type": "object"}}]
        message = anthropic_client(proxy).messages.create(
            model="m", max_tokens=50, tools=tools,
            messages=[
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t0", "name": long_name, "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t0", "content": "ok"}]},
            ],
        )  # fmt: skip
        body = _sent(fake)
    assert [t["function"]["name"] for t in body["tools"]] == [short]
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == short
    assert [(b.type, getattr(b, "name", None)) for b in message.content] == [
        ("tool_use", long_name)
    ]


def test_a_matched_stop_sequence_reaches_an_anthropic_client_from_every_upstream() -> None:
    """Research b.4: a stop the client asked for is reported as ``stop_sequence`` with the
    string; an end-of-turn the server matched by itself stays ``end_turn``."""
    for upstream in ("chat", "anthropic"):
        for asked, expected in ((["END"], ("stop_sequence", "END")), ([], ("end_turn", None))):
            reply = Reply(text="the answer is 4 ", matched_stop="END")
            with proxied(lambda _, r=reply: r, upstream) as (fake, proxy):
                client = anthropic_client(proxy)
                whole = client.messages.create(
                    model="glm", max_tokens=50, stop_sequences=asked,
                    messages=[{"role": "user", "content": "2+2?"}],
                )  # fmt: skip
                with client.messages.stream(
                    model="glm", max_tokens=50, stop_sequences=asked,
                    messages=[{"role": "user", "content": "2+2?"}],
                ) as stream:  # fmt: skip
                    streamed = stream.get_final_message()
                assert _sent(fake).get("stop", _sent(fake).get("stop_sequences", [])) == asked
            for message in (whole, streamed):
                assert (message.stop_reason, message.stop_sequence) == expected, upstream
                assert message.content[0].type == "text"
                assert message.content[0].text == "the answer is 4 "


def test_a_stop_token_id_is_not_mistaken_for_a_stop_sequence() -> None:
    # SGLang reports an EOS token id as an integer matched_stop
    with proxied(lambda _: Reply(text="x", matched_stop=151336), "chat") as (_, proxy):
        message = anthropic_client(proxy).messages.create(
            model="glm", max_tokens=5, stop_sequences=["151336"],
            messages=[{"role": "user", "content": "hi"}],
        )  # fmt: skip
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
