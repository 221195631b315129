"""Thinking budgets sent the way SGLang takes them, and dropped where the server does not."""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
import types
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from solver.config import Settings
from solver.llm import (
    Endpoint,
    Message,
    ModelClient,
    Request,
    RetryPolicy,
    ServerInfo,
    encode_request,
    request_from_params,
    request_params,
)
from solver.run.endpoint_notes import endpoint_notes
from solver.testing.fake_sglang import FakeSGLang
from solver.wire.thinking import (
    ANSWER_ROOM,
    PROCESSOR_BASE,
    fitted_budget,
    processor_string,
    think_tokens_for,
    thinking_budget_blocker,
    with_thinking_budget,
)
from tests.llm.recorder import Recorder


class _Processor(ABC):
    @abstractmethod
    def __call__(self, logits: Any, custom_param_list: Any = None) -> Any: ...


class _ThinkingBudget(_Processor):
    def __call__(self, logits: Any, custom_param_list: Any = None) -> Any:
        return logits


@pytest.fixture
def sglang_module() -> Iterator[type]:
    """SGLang's processor module as the server imports it, standing in for the real one."""
    module_name, base_name = PROCESSOR_BASE
    saved = {n: sys.modules.get(n) for n in _parents(module_name)}
    for name in _parents(module_name):
        sys.modules[name] = types.ModuleType(name)
    setattr(sys.modules[module_name], base_name, _ThinkingBudget)
    yield _ThinkingBudget
    for name, old in saved.items():
        if old is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = old


def _parents(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _loaded(text: str) -> Any:
    # as SGLang's _cache_from_str: the JSON's hex, unpickled (dill's Unpickler is pickle's)
    return pickle.loads(bytes.fromhex(json.loads(text)["callable"]))


@pytest.mark.parametrize(
    ("model", "ids"),
    [("glm-5.2-fp8", (154841, 154842, 198)), ("zai-org/GLM-4.7", (151350, 151351, 198))],
)
def test_the_processor_is_sglangs_base_with_the_familys_think_tokens(
    sglang_module: type, model: str, ids: tuple[int, int, int]
) -> None:
    cls = _loaded(processor_string(think_tokens_for(model)))
    assert issubclass(cls, sglang_module)
    assert ids == (cls.THINKING_START_TOKEN_ID, cls.THINKING_END_TOKEN_ID, cls.NEW_LINE_TOKEN_ID)
    assert cls()("logits") == "logits"  # SGLang instantiates it and calls it


def _request(**kw: Any) -> Request:
    defaults: dict[str, Any] = {"model": "glm-5.2-fp8", "max_tokens": 30, "temperature": 1.0}
    return Request(messages=(Message.text("user", "prove it"),), **{**defaults, **kw})


def test_budget_fields_are_in_the_body_and_reproduced_from_the_record() -> None:
    request = with_thinking_budget(_request(thinking_budget=4000, max_tokens=64_000))
    body = orjson.loads(encode_request("chat", request))
    assert body["custom_params"] == {"thinking_budget": 4000}
    assert json.loads(body["custom_logit_processor"])["callable"]
    rebuilt = request_from_params(request.messages, request_params(request))
    assert encode_request("chat", rebuilt) == encode_request("chat", request)


def test_a_budget_alone_never_reaches_a_body() -> None:
    for api in ("chat", "responses", "anthropic"):
        body = orjson.loads(encode_request(api, _request(thinking_budget=4000)))
        assert "custom_params" not in body and "thinking_budget" not in json.dumps(body)


@pytest.mark.parametrize(
    ("info", "why"),
    [
        (None, "probe failed"),
        (ServerInfo(models=(), context_length=None, raw=b"", url="", server="vllm"), "vllm"),
        (
            ServerInfo(
                models=(),
                context_length=None,
                raw=b"",
                url="",
                server="sglang",
                custom_logit_processor=False,
            ),
            "--enable-custom-logit-processor",
        ),
    ],
)
def test_servers_that_do_not_take_a_budget_are_named(info: ServerInfo | None, why: str) -> None:
    blocker = thinking_budget_blocker("chat", info)
    assert blocker is not None and why in blocker


def test_sglang_with_the_flag_takes_a_budget_and_other_protocols_do_not() -> None:
    info = ServerInfo(
        models=(),
        context_length=None,
        raw=b"",
        url="",
        server="sglang",
        custom_logit_processor=True,
    )
    assert thinking_budget_blocker("chat", info) is None
    assert thinking_budget_blocker("anthropic", info) is not None


def _complete(
    fake: FakeSGLang, *requests: Request, notices: list[str] | None = None
) -> tuple[list[Any], Recorder]:
    """The requests, in turn, through one client (so what it learnt carries over)."""
    endpoint = Endpoint(base_url=fake.url, api="chat", model="glm-fake")
    recorder = Recorder()
    retry = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.05)
    hook = notices.append if notices is not None else None

    async def run() -> list[Any]:
        async with ModelClient(endpoint, retry=retry, on_notice=hook) as client:
            return [await client.complete(r, recorder) for r in requests]

    return asyncio.run(run()), recorder


def test_with_a_budget_a_long_reasoning_ends_with_an_answer() -> None:
    with FakeSGLang(rate=10_000, tokens=4, reasoning_tokens=50) as fake:
        (cut, budgeted), _ = _complete(
            fake,
            _request(model="glm-fake", max_tokens=30),
            _request(model="glm-fake", max_tokens=30, thinking_budget=10),
        )
        sent = fake.bodies[-1]
    assert cut.finish_reason == "length" and cut.text == ""
    assert budgeted.finish_reason == "stop" and budgeted.text.split() == [
        "t10",
        "t11",
        "t12",
        "t13",
    ]
    assert sent["custom_params"] == {"thinking_budget": 10}
    assert "custom_logit_processor" in sent


def test_a_budget_is_fitted_to_the_cap_so_the_answer_still_has_room() -> None:
    """A budget past what the call's cap leaves for the answer is lowered (to the cap less
    the room the configuration left, up to ANSWER_ROOM, at most half the cap): a call capped
    to the served context still ends with an answer, and the journal records the budget that
    was sent."""
    assert fitted_budget(4000, 256_000) == 4000  # room to spare: as configured
    assert fitted_budget(200_000, 131_072) == 131_072 - ANSWER_ROOM
    assert fitted_budget(4000, 100) == 50  # a small cap keeps half for the answer
    # a call not capped keeps the budget it was given, however little room that leaves
    assert fitted_budget(15_000, 16_000, max_tokens=16_000) == 15_000
    # capped, it keeps the room the configuration left (1000 tokens), not more
    assert fitted_budget(15_000, 10_000, max_tokens=16_000) == 9_000
    # a budget at max_tokens keeps ANSWER_ROOM under any cap
    assert fitted_budget(256_000, 256_000, max_tokens=256_000) == 256_000 - ANSWER_ROOM
    # a served context of 72 tokens caps the call near 60; 100 tokens of reasoning would
    # run past it, and a budget of 1000 would never be reached
    with FakeSGLang(rate=10_000, tokens=4, reasoning_tokens=100, context_length=72) as fake:
        (done,), recorder = _complete(
            fake, _request(model="glm-fake", max_tokens=256_000, thinking_budget=1000)
        )
        sent = fake.bodies[-1]
    cap = sent["max_tokens"]
    assert cap < 100 and sent["custom_params"] == {"thinking_budget": cap // 2}
    assert done.finish_reason == "stop" and done.text.split()[-1] == "t" + str(cap // 2 + 3)
    assert recorder.starts[0].request.thinking_budget == cap // 2


def test_sglang_without_the_flag_gets_no_budget_per_its_server_info() -> None:
    with FakeSGLang(rate=10_000, tokens=4, custom_logit_processor=False) as fake:
        (done,), recorder = _complete(fake, _request(model="glm-fake", thinking_budget=10))
        assert "custom_params" not in fake.bodies[-1] and len(fake.bodies) == 1
    assert done.finish_reason == "length"
    assert recorder.starts[0].request.thinking_budget is None  # recorded as sent


@pytest.mark.parametrize("stream", [True, False])
def test_a_refused_budget_is_dropped_said_once_and_the_call_succeeds(stream: bool) -> None:
    notices: list[str] = []
    with FakeSGLang(
        rate=10_000, tokens=4, custom_logit_processor=False, server_info_flag=False
    ) as fake:
        request = _request(model="glm-fake", thinking_budget=10, stream=stream)
        done, recorder = _complete(fake, request, request, notices=notices)
        assert ["custom_params" in b for b in fake.bodies] == [True, False, False]
    assert [c.finish_reason for c in done] == ["length", "length"]
    assert len(notices) == 1 and "custom logit processor" in notices[0]
    assert recorder.ends[0].status == (200 if stream else 400)


def test_the_notes_name_an_unused_budget_and_a_max_tokens_above_the_context() -> None:
    settings = Settings.model_validate({"roles": {"generator": {"thinking_budget": 32000}}})
    info = ServerInfo(models=("m",), context_length=131072, raw=b"", url="", server="vllm")
    notes = endpoint_notes(settings, info, "chat")
    assert any("generator 32000" in n and "not SGLang" in n for n in notes)
    assert any("131072" in n and "verifier 256000" in n for n in notes)
    small = Settings.model_validate(
        {"roles": {name: {"max_tokens": 1000} for name in ("generator", "verifier")}}
    )
    sglang = ServerInfo(
        models=("m",),
        context_length=131072,
        raw=b"",
        url="",
        server="sglang",
        custom_logit_processor=True,
    )
    assert not any("generator 1000" in n for n in endpoint_notes(small, sglang, "chat"))


def test_the_lab_model_ends_long_reasoning_at_the_budget_with_an_answer() -> None:
    from solver.testing.lab_model import _thinking_budgeted

    budget = {"custom_params": {"thinking_budget": 10_000}}
    # 50000 drawn: 40000 reasoning, 10000 answer; cut at 10000 reasoning: 20000 in all
    assert _thinking_budgeted(budget, 50_000, 10_000, 30_000) == 20_000
    assert _thinking_budgeted({}, 50_000, 10_000, 30_000) is None  # no budget: max_tokens cuts
    assert _thinking_budgeted(budget, 12_000, 2_400, 30_000) is None  # reasoning within budget
    assert _thinking_budgeted(budget, 50_000, 10_000, 15_000) is None  # the answer cannot fit
