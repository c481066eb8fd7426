"""Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`) through
the official `anthropic` client against a real `sluice serve` with an API key.

The fixture model has random weights: it never calls a tool by itself, so calls are forced
with `tool_choice`, and a `logit_bias` towards `"` (token 6) makes its strings close so that
forced calls finish well within `max_tokens`. Sampling extensions (`seed`, `logit_bias`) go
in the client's `extra_body`.
"""

import json

import anthropic
import jsonschema
import pytest
from agent_tools import NO_NEWLINES, NUDGE, anthropic_tool, enforced
from sluice_server import TOOLS_MODEL_DIR, serve

MODEL = "llama-tools"
API_KEY = "test-key"
READ_FILE = anthropic_tool("read_file")
RUN_COMMAND = anthropic_tool("run_command")
TOOLS = [READ_FILE, RUN_COMMAND]
SCHEMAS = {t["name"]: t["input_schema"] for t in TOOLS}
MESSAGES = [{"role": "user", "content": "List the files in /tmp, then show me /etc/hosts."}]

def check_tool_use(block, names):
    assert block.type == "tool_use", block
    assert block.name in names
    assert block.id.startswith("toolu_")
    assert isinstance(block.input, dict)
    jsonschema.validate(block.input, enforced(SCHEMAS[block.name]))


@pytest.fixture(scope="module")
def url():
    with serve("--api-key", API_KEY, model_dir=TOOLS_MODEL_DIR) as url:
        yield url


@pytest.fixture(scope="module")
def client(url):
    # The client sends the key as `x-api-key`.
    return anthropic.Anthropic(base_url=url, api_key=API_KEY, max_retries=0)


def test_a_message_answers_with_a_text_block(client):
    m = client.messages.create(model=MODEL, max_tokens=16, messages=MESSAGES,
                               extra_body={"seed": 1})
    assert m.type == "message" and m.role == "assistant" and m.model == MODEL
    assert m.id.startswith("msg_")
    [block] = m.content
    assert block.type == "text" and isinstance(block.text, str) and block.text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.stop_sequence is None
    assert 1 <= m.usage.output_tokens <= 16
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens > 0


def test_max_tokens_stops_with_max_tokens(client):
    m = client.messages.create(model=MODEL, max_tokens=3, messages=MESSAGES,
                               extra_body={"seed": 2})
    assert m.stop_reason == "max_tokens"
    assert m.usage.output_tokens == 3


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_sequence_ends_the_turn_and_is_named(client, stream):
    # The seeded turn without stops, then cut by a piece of its own text: the answer ends
    # before that piece, with `stop_reason: "stop_sequence"` naming it, streamed or not.
    free = client.messages.create(model=MODEL, max_tokens=24, messages=MESSAGES,
                                  extra_body={"seed": 5})
    text = free.content[0].text
    assert len(text) >= 6, text
    stop = text[3:6]
    kwargs = dict(model=MODEL, max_tokens=24, messages=MESSAGES, stop_sequences=[stop],
                  extra_body={"seed": 5})
    if stream:
        with client.messages.stream(**kwargs) as s:
            m = s.get_final_message()
    else:
        m = client.messages.create(**kwargs)
    assert m.stop_reason == "stop_sequence"
    assert m.stop_sequence == stop
    assert "".join(b.text for b in m.content if b.type == "text") == text[:text.index(stop)]


def test_the_key_is_required(url):
    bad = anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model=MODEL, max_tokens=4, messages=MESSAGES)


def test_system_as_a_list_of_blocks(client):
    system_text = "You are a terse assistant working in a Rust repository."
    as_blocks = client.messages.create(
        model=MODEL, max_tokens=8, messages=MESSAGES, extra_body={"seed": 3},
        system=[{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral"}}],
    )
    as_string = client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES,
                                       system=system_text, extra_body={"seed": 3})
    bare = client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES,
                                  extra_body={"seed": 3})

    def prompt(m):
        return m.usage.input_tokens + m.usage.cache_read_input_tokens

    # Without a system message Qwen's template puts in its own default one.
    assert prompt(as_blocks) == prompt(as_string) != prompt(bare)
    assert as_blocks.content[0].text == as_string.content[0].text


def stream_events(client, **kwargs):
    with client.messages.stream(**kwargs) as stream:
        events = [e for e in stream if e.type not in ("text", "input_json")]
        final = stream.get_final_message()
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    blocks = types[1:-2]
    index = 0
    while blocks:
        assert blocks[0] == "content_block_start", types
        end = blocks.index("content_block_stop")
        assert set(blocks[1:end]) <= {"content_block_delta"}, types
        blocks = blocks[end + 1:]
        index += 1
    starts = [e.index for e in events if e.type == "content_block_start"]
    assert starts == list(range(index)) and index == len(final.content)
    return events, final


@pytest.mark.parametrize("seed", [1, 4])
def test_stream_final_message_equals_nonstream(client, seed):
    # This client version has no `temperature` argument: it goes in the body too.
    kwargs = dict(model=MODEL, max_tokens=24, messages=MESSAGES,
                  extra_body={"seed": seed, "temperature": 0.9, **NO_NEWLINES})
    whole = client.messages.create(**kwargs)
    events, final = stream_events(client, **kwargs)
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in whole.content]
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert events[0].message.id == final.id


def test_streamed_tool_use_equals_nonstream(client):
    kwargs = dict(model=MODEL, max_tokens=400, messages=MESSAGES, tools=TOOLS,
                  tool_choice={"type": "any"}, extra_body={"seed": 3, **NUDGE})
    whole = client.messages.create(**kwargs)
    events, final = stream_events(client, **kwargs)
    assert final.stop_reason == whole.stop_reason == "tool_use"
    [streamed], [one] = final.content, whole.content
    check_tool_use(streamed, SCHEMAS)
    assert (streamed.name, streamed.input) == (one.name, one.input)
    partial = "".join(e.delta.partial_json for e in events
                      if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
    assert json.loads(partial) == one.input


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_any_forces_a_valid_tool_use(client, seed):
    m = client.messages.create(model=MODEL, max_tokens=400, messages=MESSAGES, tools=TOOLS,
                               tool_choice={"type": "any"}, extra_body={"seed": seed, **NUDGE})
    assert m.stop_reason == "tool_use"
    assert m.content and all(b.type == "tool_use" for b in m.content)
    for block in m.content:
        check_tool_use(block, SCHEMAS)


# Seeds whose forced call closes within the budget: run_command's argv strings must be
# non-empty (minLength 1 is enforced), where the nudged model may ramble inside a string.
@pytest.mark.parametrize("name,seed", [("run_command", 3), ("read_file", 4)])
def test_named_tool_choice_uses_that_tool(client, name, seed):
    m = client.messages.create(model=MODEL, max_tokens=400, messages=MESSAGES, tools=TOOLS,
                               tool_choice={"type": "tool", "name": name},
                               extra_body={"seed": seed, **NUDGE})
    assert m.stop_reason == "tool_use"
    [block] = m.content
    check_tool_use(block, {name})


def test_a_tool_result_round_trip(client):
    first = client.messages.create(model=MODEL, max_tokens=400, messages=MESSAGES, tools=TOOLS,
                                   tool_choice={"type": "tool", "name": "read_file"},
                                   extra_body={"seed": 4, **NUDGE})
    [use] = first.content
    check_tool_use(use, {"read_file"})
    history = MESSAGES + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id,
             "content": [{"type": "text", "text": "127.0.0.1 localhost"}]},
        ]},
    ]
    second = client.messages.create(model=MODEL, max_tokens=8, messages=history, tools=TOOLS,
                                    extra_body={"seed": 4})
    assert second.stop_reason in ("end_turn", "max_tokens", "tool_use")
    counted = client.messages.count_tokens(model=MODEL, messages=history, tools=TOOLS)
    assert second.usage.input_tokens + second.usage.cache_read_input_tokens \
        == counted.input_tokens
    # An error result (`is_error`) renders like any other.
    history[-1]["content"][0]["is_error"] = True
    again = client.messages.create(model=MODEL, max_tokens=4, messages=history, tools=TOOLS)
    assert again.stop_reason in ("end_turn", "max_tokens", "tool_use")


def test_count_tokens_grows_with_tools(client):
    bare = client.messages.count_tokens(model=MODEL, messages=MESSAGES)
    with_tools = client.messages.count_tokens(model=MODEL, messages=MESSAGES, tools=TOOLS)
    assert isinstance(bare.input_tokens, int) and bare.input_tokens > 0
    assert with_tools.input_tokens > bare.input_tokens
    m = client.messages.create(model=MODEL, max_tokens=2, messages=MESSAGES)
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == bare.input_tokens


def test_errors_arrive_in_anthropics_shape(client):
    with pytest.raises(anthropic.NotFoundError) as e:
        client.messages.create(model="no-such-model", max_tokens=4, messages=MESSAGES)
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "not_found_error"
    assert "no-such-model" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=MODEL, max_tokens=4, messages=[])
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=MODEL, max_tokens=4, messages=MESSAGES, tools=TOOLS,
                               tool_choice={"type": "tool", "name": "nope"})
    assert e.value.body["type"] == "error" and "nope" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError) as e:
        client.messages.count_tokens(model="no-such-model", messages=MESSAGES)
    assert e.value.body["type"] == "error"


VERDICT = {"type": "object", "additionalProperties": False, "required": ["ok", "score"],
           "properties": {"ok": {"type": "boolean"}, "score": {"enum": [1, 2, 3]}}}


@pytest.mark.parametrize("field", ["output_config", "output_format"])
def test_structured_outputs_follow_the_schema(client, field):
    # Anthropic's structured outputs, GA (`output_config.format`) and beta (`output_format`):
    # the text block is a document of the schema (jsonschema, not sluice, checks it).
    fmt = {"type": "json_schema", "schema": VERDICT}
    body = {"output_config": {"format": fmt}} if field == "output_config" else {"output_format": fmt}
    for seed in range(3):
        m = client.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES,
                                   extra_body={**body, "seed": seed, **NO_NEWLINES})
        [block] = m.content
        assert m.stop_reason == "end_turn", block
        jsonschema.validate(json.loads(block.text), VERDICT)


def test_a_structured_output_with_an_unsupported_keyword_names_the_field(client):
    schema = {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES,
                               extra_body={"output_config": {"format": {"type": "json_schema",
                                                                        "schema": schema}}})
    assert "multipleOf" in e.value.body["error"]["message"]
