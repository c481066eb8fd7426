"""Tool calling through the official `openai` client against a real `sluice serve`.

The fixture model has random weights, so it never chooses a tool by itself: `tool_choice`
`required` and named force a call through the server's constraint, and these tests check that
every forced call arrives as the client's own types, parses, and validates against its
schema, streamed (deltas assembled by the client) exactly as in one body. The model's template
is Qwen2.5's (Hermes-style `<tool_call>` markup). Left alone, a random model fills a string
forever; `NUDGE` biases the quote token (id 6) so strings close and calls finish.
"""

import json

import openai
import pytest
from sluice_server import TOOLS_MODEL_DIR, serve

MODEL = "llama-tools"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a command",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "timeout_ms": {"type": "integer", "minimum": 1},
                "workdir": {"type": "string", "pattern": "^/"},
            },
            "required": ["command"],
        },
    },
}
TOOLS = [WEATHER, SHELL]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
NUDGE = {"logit_bias": {"6": 14}, "max_tokens": 600}


@pytest.fixture(scope="module")
def client():
    with serve(model_dir=TOOLS_MODEL_DIR) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


def check_call(call, names):
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name in names
    args = json.loads(call.function.arguments)
    assert isinstance(args, dict)
    if call.function.name == "get_weather":
        assert set(args) == {"city", "unit"}
        assert isinstance(args["city"], str) and args["unit"] in ("celsius", "fahrenheit")
    else:
        assert isinstance(args["command"], list) and len(args["command"]) >= 1
        assert all(isinstance(c, str) for c in args["command"])
        assert set(args) <= {"command", "timeout_ms", "workdir"}
    return args


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_required_forces_a_valid_call(client, seed):
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, tool_choice="required", seed=seed,
        **NUDGE,
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls, choice.message
    for call in choice.message.tool_calls:
        check_call(call, {"get_weather", "shell"})
    assert not choice.message.content


def test_named_choice_calls_that_function(client):
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, seed=7, **NUDGE,
        tool_choice={"type": "function", "function": {"name": "shell"}},
    )
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1
    check_call(calls[0], {"shell"})


def test_streamed_call_assembles_to_the_one_body(client):
    kwargs = dict(model=MODEL, messages=MESSAGES, tools=TOOLS, tool_choice="required",
                  seed=11, temperature=0.8, **NUDGE)
    whole = client.chat.completions.create(**kwargs).choices[0]
    calls = {}
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            assert not c.delta.content, "no markup may leak into content"
            for d in c.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
                if d.id:
                    call["id"] = d.id
                if d.function and d.function.name:
                    call["name"] = d.function.name
                if d.function and d.function.arguments:
                    call["arguments"] += d.function.arguments
            finish = c.finish_reason or finish
    assert finish == "tool_calls"
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (c.function.name, c.function.arguments) for c in whole.message.tool_calls
    ]


def test_tool_choice_none_and_auto_answer_in_text(client):
    for choice in ["none", "auto"]:
        r = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, tools=TOOLS, tool_choice=choice, seed=3,
            max_tokens=12,
        )
        message = r.choices[0].message
        if choice == "none":
            assert message.tool_calls is None
        assert "<tool_call>" not in (message.content or "")


def test_a_tool_loop_sends_the_result_back(client):
    first = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, seed=5, **NUDGE,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ).choices[0].message
    call = first.tool_calls[0]
    history = MESSAGES + [
        first.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp": 21})},
    ]
    second = client.chat.completions.create(
        model=MODEL, messages=history, tools=TOOLS, max_tokens=8, seed=5,
    )
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # A history whose arguments are not JSON (a botched call sent back) still renders.
    history[1]["tool_calls"][0]["function"]["arguments"] = "{not json"
    again = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS,
                                           max_tokens=4)
    assert again.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_a_named_tool_that_is_not_listed_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, tools=TOOLS, max_tokens=4,
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )
    assert "nope" in str(e.value)
