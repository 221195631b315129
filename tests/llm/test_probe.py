"""Server self-description and prompt sizes used for capping max_tokens."""

from __future__ import annotations

import pytest

from solver.llm import (
    ImagePart,
    Message,
    Request,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    estimate_prompt_tokens,
    parse_server_info,
)
from solver.llm.probe import prompt_tokens_from_error

LLAMA_MODELS = (
    b'{"models":[{"name":"smollm2-135m"}],"object":"list","data":[{"id":"smollm2-135m",'
    b'"object":"model","owned_by":"llamacpp","meta":{"n_ctx":4096,"n_ctx_train":8192}}]}'
)


def test_llama_cpp_models_give_the_served_context_not_the_trained_one() -> None:
    info = parse_server_info(LLAMA_MODELS, "u")
    assert info.models == ("smollm2-135m",) and info.context_length == 4096


def test_llama_cpp_props_and_vllm_models() -> None:
    props = b'{"default_generation_settings":{"n_ctx":2048},"total_slots":1}'
    assert parse_server_info(props, "u").context_length == 2048
    vllm = b'{"data":[{"id":"zai-org/GLM-4.6","max_model_len":202752}]}'
    assert parse_server_info(vllm, "u").context_length == 202752
    assert parse_server_info(b"not json", "u").context_length is None
    trained_only = b'{"data":[{"id":"m","meta":{"n_ctx_train":8192}}]}'
    assert parse_server_info(trained_only, "u").context_length == 8192


def test_estimate_counts_every_kind_of_part() -> None:
    text = Request("m", (Message.text("user", "x" * 300),), 10)
    assert estimate_prompt_tokens(text) == 100 + 8
    richer = Request(
        "m",
        (
            Message("user", (ImagePart(url="http://127.0.0.1/a.png"),)),
            Message("assistant", (ToolCallPart("c", "calc", '{"x":1}'),)),
            Message("tool", (ToolResultPart("c", "1" * 30),)),
        ),
        10,
        tools=(ToolSpec("calc", "adds", {"type": "object"}),),
    )
    assert estimate_prompt_tokens(richer) > 1024 + 3 * 8


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        ("You requested a total of 5000 tokens: 1000 tokens from the input messages", 1000),
        ("However, you requested 9000 tokens (1200 in the messages, 7800 in the completion)", 1200),
        ('{"error":{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":4100}}', 4100),
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9001 tokens.",
            9001,
        ),
        ("context too long", None),
    ],
)
def test_prompt_size_from_context_errors(message: str, tokens: int | None) -> None:
    assert prompt_tokens_from_error(message) == tokens
