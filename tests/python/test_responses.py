"""The Responses API (`POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`) through the
official `openai` client against a real `sluice serve`.

The fixture model has random weights: it never calls a tool by itself, so calls are forced
with `tool_choice`, and a `logit_bias` towards `"` (token 6) makes its strings close so that
forced calls finish well within `max_output_tokens`. Sampling extensions (`seed`,
`logit_bias`) go in the client's `extra_body`.
"""

import json
import re
import typing

import jsonschema
import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from agent_tools import NO_NEWLINES, NUDGE, enforced, responses_tool
from sluice_server import TOOLS_MODEL_DIR, serve

MODEL = "llama-tools"
READ_FILE = responses_tool("read_file")
RUN_COMMAND = responses_tool("run_command")
TOOLS = [READ_FILE, RUN_COMMAND]
SCHEMAS = {t["name"]: t["parameters"] for t in TOOLS}
PROMPT = "List the files in /tmp, then show me /etc/hosts."

def check_call(item, names):
    """A `function_call` output item naming one of `names`, whose arguments validate."""
    assert item.type == "function_call", item
    assert item.status == "completed", item
    assert item.name in names
    assert item.call_id.startswith("call_")
    args = json.loads(item.arguments)
    jsonschema.validate(args, enforced(SCHEMAS[item.name]))
    return args


@pytest.fixture(scope="module")
def client():
    with serve(model_dir=TOOLS_MODEL_DIR) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


def test_text_input_answers_with_a_message(client):
    r = client.responses.create(model=MODEL, input="Say hello.", max_output_tokens=16,
                                extra_body={"seed": 1})
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.model == MODEL
    assert r.status in ("completed", "incomplete")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    else:
        assert r.incomplete_details is None
    [message] = r.output
    assert message.type == "message" and message.role == "assistant"
    assert r.output_text == message.content[0].text
    assert isinstance(r.output_text, str) and r.output_text
    assert 1 <= r.usage.output_tokens <= 16
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.max_output_tokens == 16 and r.store is True


def test_max_output_tokens_makes_it_incomplete(client):
    r = client.responses.create(model=MODEL, input="Tell me a long story.",
                                max_output_tokens=3, extra_body={"seed": 2})
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3


# What a stream may be: created, in_progress, each item's events in order, then the end.
ITEM = (
    r"response\.output_item\.added "
    r"(?:response\.content_part\.added (?:response\.output_text\.delta )*"
    r"response\.output_text\.done response\.content_part\.done "
    r"|response\.content_part\.added (?:response\.reasoning_text\.delta )*"
    r"response\.reasoning_text\.done response\.content_part\.done "
    r"|(?:response\.function_call_arguments\.delta )*response\.function_call_arguments\.done )"
    r"response\.output_item\.done "
)
STREAM = re.compile(
    rf"response\.created response\.in_progress (?:{ITEM})+response\.(?:completed|incomplete)"
)
EVENT_TYPES = typing.get_args(typing.get_args(ResponseStreamEvent)[0])


def stream_events(client, **kwargs):
    events = list(client.responses.create(stream=True, **kwargs))
    for e in events:
        assert isinstance(e, EVENT_TYPES), f"not parsed as an SDK event type: {e!r}"
    assert STREAM.fullmatch(" ".join(e.type for e in events)), [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return events


@pytest.mark.parametrize("seed", [1, 5])
def test_stream_text_equals_nonstream_text(client, seed):
    kwargs = dict(model=MODEL, input="Write a haiku about rivers.", max_output_tokens=24,
                  temperature=0.9, extra_body={"seed": seed, **NO_NEWLINES})
    whole = client.responses.create(**kwargs)
    events = stream_events(client, **kwargs)
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    [done] = [e.text for e in events if e.type == "response.output_text.done"]
    final = events[-1].response
    assert deltas == done == final.output_text == whole.output_text
    assert final.status == whole.status
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert events[0].response.status == "in_progress"
    assert events[0].response.id == final.id


def test_streamed_call_arguments_equal_nonstream(client):
    kwargs = dict(model=MODEL, input=PROMPT, tools=TOOLS, tool_choice="required",
                  max_output_tokens=400, extra_body={"seed": 3, **NUDGE})
    whole = client.responses.create(**kwargs)
    [call] = whole.output
    check_call(call, SCHEMAS)
    events = stream_events(client, **kwargs)
    deltas = "".join(e.delta for e in events
                     if e.type == "response.function_call_arguments.delta")
    [done] = [e for e in events if e.type == "response.function_call_arguments.done"]
    [streamed] = events[-1].response.output
    assert deltas == done.arguments == streamed.arguments == call.arguments
    assert streamed.name == call.name
    assert events[-1].type == "response.completed"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_required_forces_a_valid_call(client, seed):
    r = client.responses.create(model=MODEL, input=PROMPT, tools=TOOLS,
                                tool_choice="required", max_output_tokens=400,
                                extra_body={"seed": seed, **NUDGE})
    assert r.status == "completed"
    assert r.output and all(item.type == "function_call" for item in r.output)
    for item in r.output:
        check_call(item, SCHEMAS)
    assert r.output_text == ""


# Seeds whose forced call closes within the budget: run_command's argv strings must be
# non-empty (minLength 1 is enforced), where the nudged model may ramble inside a string.
@pytest.mark.parametrize("name,seed", [("run_command", 3), ("read_file", 4)])
def test_named_choice_calls_that_function(client, name, seed):
    r = client.responses.create(model=MODEL, input=PROMPT, tools=TOOLS,
                                tool_choice={"type": "function", "name": name},
                                max_output_tokens=400, extra_body={"seed": seed, **NUDGE})
    assert r.status == "completed"
    [call] = r.output
    check_call(call, {name})
    assert r.tool_choice.name == name


def test_a_call_cut_off_by_max_output_tokens_is_incomplete(client):
    r = client.responses.create(model=MODEL, input=PROMPT, tools=TOOLS,
                                tool_choice={"type": "function", "name": "run_command"},
                                max_output_tokens=200, extra_body={"seed": 1, **NUDGE})
    assert r.status == "incomplete"
    [call] = r.output
    assert call.type == "function_call"
    assert call.status == "incomplete", "a call with cut-off arguments is not completed"


def test_unknown_tool_types_are_skipped(client):
    r = client.responses.create(
        model=MODEL, input=PROMPT, tool_choice="required", max_output_tokens=400,
        tools=[{"type": "web_search_preview"}, *TOOLS, {"type": "code_interpreter",
                                                         "container": {"type": "auto"}}],
        extra_body={"seed": 3, **NUDGE},
    )
    [call] = r.output
    check_call(call, SCHEMAS)
    # Only hosted tools: nothing to call, so the model answers in text.
    r = client.responses.create(model=MODEL, input="Search the web for sluice.",
                                tools=[{"type": "web_search_preview"}], max_output_tokens=4,
                                extra_body={"seed": 3})
    assert [item.type for item in r.output] == ["message"]


def test_custom_tools_call_with_free_text_kept_to_their_grammar(client):
    # Codex's kind of tool: a `custom` tool with a Lark grammar. The SDK parses the call as a
    # ResponseCustomToolCall; the input is a sentence of the grammar (Python's `re` checks
    # the equivalent expression written here by hand), streamed or not, and the call goes back
    # through previous_response_id with its output.
    grammar = ('start: move (", " move){0,2}\nmove: DIR " " DIGIT DIGIT? DIGIT?\n'
               'DIR: "north" | "south"\n%import common.DIGIT')
    oracle = r"(north|south) [0-9]{1,3}(, (north|south) [0-9]{1,3}){0,2}"
    tool = {"type": "custom", "name": "walk", "description": "Walk somewhere.",
            "format": {"type": "grammar", "syntax": "lark", "definition": grammar}}
    for seed in range(3):
        r = client.responses.create(model=MODEL, input="Walk.", tools=[tool, READ_FILE],
                                    tool_choice={"type": "custom", "name": "walk"},
                                    max_output_tokens=200, extra_body={"seed": seed})
        [call] = r.output
        assert r.status == "completed", r
        assert call.type == "custom_tool_call" and call.name == "walk", call
        assert re.fullmatch(oracle, call.input), call.input
        with client.responses.stream(model=MODEL, input="Walk.", tools=[tool, READ_FILE],
                                     tool_choice={"type": "custom", "name": "walk"},
                                     max_output_tokens=200, extra_body={"seed": seed}) as stream:
            done = [e.input for e in stream if e.type == "response.custom_tool_call_input.done"]
            final = stream.get_final_response()
        assert done == [call.input] and final.output[0].input == call.input
    second = client.responses.create(
        model=MODEL, previous_response_id=r.id, tools=[tool, READ_FILE], max_output_tokens=8,
        input=[{"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Arrived."}],
        extra_body={"seed": 1})
    assert second.usage.input_tokens > r.usage.input_tokens


def test_a_tool_loop_continues_from_the_previous_response(client):
    first = client.responses.create(model=MODEL, input=PROMPT, tools=TOOLS,
                                    tool_choice={"type": "function", "name": "read_file"},
                                    max_output_tokens=400, extra_body={"seed": 4, **NUDGE})
    [call] = first.output
    check_call(call, {"read_file"})
    second = client.responses.create(
        model=MODEL, previous_response_id=first.id, tools=TOOLS, max_output_tokens=8,
        input=[{"type": "function_call_output", "call_id": call.call_id,
                "output": "127.0.0.1 localhost"}],
        extra_body={"seed": 4},
    )
    assert second.previous_response_id == first.id
    assert second.status in ("completed", "incomplete")
    # The stored conversation (prompt, call, output) comes before the new input.
    assert second.usage.input_tokens > first.usage.input_tokens
    alone = client.responses.create(
        model=MODEL, tools=TOOLS, max_output_tokens=8, extra_body={"seed": 4},
        input=[{"type": "function_call_output", "call_id": call.call_id,
                "output": "127.0.0.1 localhost"}],
    )
    assert second.usage.input_tokens > alone.usage.input_tokens


def test_retrieve_and_delete_a_stored_response(client):
    r = client.responses.create(model=MODEL, input="Hi.", max_output_tokens=4,
                                extra_body={"seed": 1})
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text
    assert got.usage.output_tokens == r.usage.output_tokens
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)


def test_input_items_list_the_requests_own_input(client):
    first = client.responses.create(model=MODEL, input="Hi.", max_output_tokens=4)
    r = client.responses.create(
        model=MODEL, previous_response_id=first.id, max_output_tokens=4,
        input=[{"role": "developer", "content": "Be brief."},
               {"role": "user", "content": [{"type": "input_text", "text": "Again."}]},
               {"type": "function_call", "call_id": "call_x", "name": "read_file",
                "arguments": '{"path": "/etc/hosts"}'},
               {"type": "function_call_output", "call_id": "call_x", "output": "localhost"}],
    )
    page = client.responses.input_items.list(r.id)
    assert page.has_more is False
    newest_first = page.data
    assert [i.type for i in newest_first] == [
        "function_call_output", "function_call", "message", "message"]
    assert newest_first[0].output == "localhost" and newest_first[0].call_id == "call_x"
    assert json.loads(newest_first[1].arguments) == {"path": "/etc/hosts"}
    assert newest_first[2].content[0].text == "Again."
    assert page.first_id == newest_first[0].id and page.last_id == newest_first[-1].id
    assert len({i.id for i in newest_first}) == 4
    # One item a page: the client follows `after` through `has_more`.
    ascending = list(client.responses.input_items.list(r.id, order="asc", limit=1))
    assert [i.id for i in ascending] == [i.id for i in reversed(newest_first)]
    [only] = client.responses.input_items.list(first.id).data
    assert only.type == "message" and only.content[0].text == "Hi."
    with pytest.raises(openai.BadRequestError):
        client.responses.input_items.list(r.id, limit=0)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_doesnotexist")


def test_an_unstored_response_cannot_be_retrieved_or_continued(client):
    r = client.responses.create(model=MODEL, input="Hi.", max_output_tokens=4, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, input="Again.", previous_response_id=r.id,
                                max_output_tokens=4)


def test_unknown_previous_response_id_is_a_404(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=MODEL, input="Hi.", max_output_tokens=4,
                                previous_response_id="resp_doesnotexist")
    assert e.value.body["param"] == "previous_response_id"


def test_json_schema_format_gives_matching_json(client):
    schema = {
        "type": "object",
        "properties": {
            "language": {"type": "string", "enum": ["rust", "python", "go"]},
            "files": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "done": {"type": "boolean"},
        },
        "required": ["language", "files", "done"],
        "additionalProperties": False,
    }
    r = client.responses.create(
        model=MODEL, input="Describe the project as JSON.", max_output_tokens=400,
        text={"format": {"type": "json_schema", "name": "project", "schema": schema,
                         "strict": True}},
        extra_body={"seed": 2, **NUDGE},
    )
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), schema)
    assert r.text.format.type == "json_schema"


def test_stored_responses_belong_to_their_api_key():
    with serve("--api-key", "key-a", "--api-key", "key-b", model_dir=TOOLS_MODEL_DIR) as url:
        a = openai.OpenAI(base_url=url + "/v1", api_key="key-a", max_retries=0)
        b = openai.OpenAI(base_url=url + "/v1", api_key="key-b", max_retries=0)
        r = a.responses.create(model=MODEL, input="Hi.", max_output_tokens=4)
        assert a.responses.retrieve(r.id).id == r.id
        with pytest.raises(openai.NotFoundError):
            b.responses.retrieve(r.id)
        with pytest.raises(openai.NotFoundError):
            b.responses.create(model=MODEL, input="Again.", previous_response_id=r.id,
                               max_output_tokens=4)
        with pytest.raises(openai.NotFoundError):
            b.responses.input_items.list(r.id)
        assert len(a.responses.input_items.list(r.id).data) == 1
        with pytest.raises(openai.NotFoundError):
            b.responses.delete(r.id)
        assert a.responses.retrieve(r.id).id == r.id, "B's delete must not remove A's"
