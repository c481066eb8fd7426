"""The official `openai` Python client against a real `sluice serve`.

Runs the server binary ($SLUICE_BIN, default target/debug/sluice) on the tiny fixture model with
an API key, on a free loopback port, and checks that chat and completions (streaming and not,
with logprobs) parse as the client's own types and that errors raise the client's own
exception classes.
"""

import base64
import json
import re
import struct

from typing import Literal

import openai
import pydantic
import pytest
from sluice_server import MODEL_DIR, serve

MODEL = "llama"
API_KEY = "test-key"


@pytest.fixture(scope="module")
def base_url():
    with serve("--api-key", API_KEY) as url:
        yield url + "/v1"


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)


MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say something."},
]


def test_models_lists_the_served_model(client):
    ids = [m.id for m in client.models.list()]
    assert ids == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_chat_completion(client):
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8, seed=1)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    assert r.system_fingerprint
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert 1 <= r.usage.completion_tokens <= 8


def test_chat_stream_matches_non_stream(client):
    params = dict(model=MODEL, messages=MESSAGES, max_tokens=12, temperature=1.0, seed=42,
                  extra_body={"ignore_eos": True})
    whole = client.chat.completions.create(**params)
    stream = client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **params)
    text, finishes, usage, ids = "", [], None, set()
    for chunk in stream:
        ids.add(chunk.id)
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            if c.finish_reason is not None:
                finishes.append(c.finish_reason)
    assert len(ids) == 1
    assert text == whole.choices[0].message.content
    assert finishes == [whole.choices[0].finish_reason]
    assert usage.completion_tokens == whole.usage.completion_tokens


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4, logprobs=True,
                                       top_logprobs=2, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert entry.logprob <= 0
        # The token's own bytes; its text shows U+FFFD where a token holds part of a character.
        assert bytes(entry.bytes).decode("utf-8", errors="replace") == entry.token
        assert len(entry.top_logprobs) == 2


def test_logprobs_bytes_of_a_token_holding_part_of_a_character(client):
    # "æ" in a byte-level vocabulary is the lone byte 0xE6, the first of a 3-byte character.
    bias = {str(vocab_id("æ")): 100}
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1, logprobs=True,
                                       logit_bias=bias, extra_body={"ignore_eos": True})
    entry = r.choices[0].logprobs.content[0]
    assert entry.bytes == [0xE6]
    assert entry.token == "\ufffd"


def test_chat_n_choices(client):
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3, n=3,
                                       extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert all(c.finish_reason == "length" for c in r.choices)


def test_completion_and_stream(client):
    params = dict(model=MODEL, prompt="In the beginning", max_tokens=10, temperature=0.7, seed=3)
    whole = client.completions.create(**params)
    assert whole.object == "text_completion"
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **params) if c.choices)
    assert streamed == whole.choices[0].text


def test_completion_logprobs(client):
    r = client.completions.create(model=MODEL, prompt="light", max_tokens=5, logprobs=2,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.text_offset) == 5
    assert all(len(top) <= 2 for top in lp.top_logprobs)


def vocab_id(token: str) -> int:
    return json.loads((MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"][token]


def test_json_mode_output_is_json(client):
    # Left to itself the random-weight model writes token soup; in JSON mode it writes JSON.
    for seed in range(6):
        r = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=24, temperature=2.0, seed=seed,
            response_format={"type": "json_object"},
        )
        choice = r.choices[0]
        assert choice.message.content.startswith("{"), choice.message.content
        if choice.finish_reason == "stop":
            assert isinstance(json.loads(choice.message.content), dict)
        else:
            assert choice.finish_reason == "length"


def test_json_mode_stops_when_the_object_closes_streamed_or_not(client):
    # Biased towards "{" then "}": the mask lets "{" open and "}" close, nothing else between.
    bias = {str(vocab_id("{")): 100, str(vocab_id("}")): 50}
    params = dict(model=MODEL, messages=MESSAGES, max_tokens=24, seed=0, logit_bias=bias,
                  response_format={"type": "json_object"})
    whole = client.chat.completions.create(**params)
    assert whole.choices[0].message.content == "{}"
    assert whole.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(stream=True, **params))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "{}"
    assert chunks[-1].choices[0].finish_reason == "stop"
    completion = client.completions.create(
        model=MODEL, prompt="Data:", max_tokens=24, logit_bias=bias,
        extra_body={"response_format": {"type": "json_object"}},
    )
    assert completion.choices[0].text == "{}"


class Verdict(pydantic.BaseModel):
    ok: bool
    score: Literal[1, 2, 3]


def test_json_schema_output_validates_against_the_pydantic_model(client):
    # The schema leaves a random-weight model only short valid documents (this model would
    # fill every gap with whitespace, so whitespace tokens are biased away): every choice ends
    # with the object, and pydantic (not sluice) checks it.
    fmt = {"type": "json_schema",
           "json_schema": {"name": "verdict", "schema": Verdict.model_json_schema(), "strict": True}}
    vocab = json.loads((MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"]
    no_whitespace = {str(i): -100 for t, i in vocab.items() if set(t) <= {"Ġ", "Ċ", "ĉ"}}
    for seed in range(4):
        r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=64,
                                           temperature=1.5, seed=seed, response_format=fmt,
                                           logit_bias=no_whitespace)
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        Verdict.model_validate_json(r.choices[0].message.content)


class Rating(pydantic.BaseModel):
    stars: int = pydantic.Field(ge=1, le=9)
    delta: int = pydantic.Field(gt=-50, lt=50)


def test_parse_with_integer_bounds_gives_values_in_range(client):
    # pydantic's Field(ge, le, gt, lt) on integers become minimum / maximum / exclusive bounds,
    # enforced while decoding: OpenAI's `.parse()` gets a Rating every time, for any seed.
    vocab = json.loads((MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"]
    no_whitespace = {str(i): -100 for t, i in vocab.items() if set(t) <= {"Ġ", "Ċ", "ĉ"}}
    for seed in range(6):
        r = client.chat.completions.parse(model=MODEL, messages=MESSAGES, max_tokens=64,
                                          temperature=1.5, seed=seed, response_format=Rating,
                                          logit_bias=no_whitespace)
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        rating = r.choices[0].message.parsed
        assert 1 <= rating.stars <= 9 and -50 < rating.delta < 50, rating


def test_unsupported_json_schema_is_refused_naming_the_keyword(client):
    schema = {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, response_format=fmt)
    assert e.value.body["param"] == "response_format"
    assert "multipleOf" in e.value.body["message"]


def test_structured_outputs_regex_choice_and_grammar_through_extra_body(client):
    # vLLM's `structured_outputs` as the client sends it (extra_body), greedy and seeded;
    # Python's `re` is the oracle for the regex.
    pattern = r"[0-9]{3}-[a-z]{2}"
    grammar = 'root ::= "<" pair{1,3} ">"\npair ::= "ab" | "cd"'
    for sampling in ({"temperature": 0.0}, {"temperature": 1.5, "seed": 5}):
        r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=30,
                                           extra_body={"structured_outputs": {"regex": pattern}},
                                           **sampling)
        assert r.choices[0].finish_reason == "stop"
        assert re.fullmatch(pattern, r.choices[0].message.content), r.choices[0].message.content
        r = client.completions.create(model=MODEL, prompt="Yes or no?", max_tokens=10,
                                      extra_body={"structured_outputs": {"choice": ["yes", "no"]}},
                                      **sampling)
        assert r.choices[0].text in ("yes", "no"), r.choices[0].text
        r = client.completions.create(model=MODEL, prompt="Pairs:", max_tokens=30,
                                      extra_body={"guided_grammar": grammar}, **sampling)
        assert re.fullmatch(r"<(ab|cd){1,3}>", r.choices[0].text), r.choices[0].text


def test_a_bad_regex_is_refused_with_its_position(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                       extra_body={"structured_outputs": {"regex": "ab(c"}})
    assert e.value.body["param"] == "structured_outputs.regex"
    assert "at byte 2 (line 1, column 3)" in e.value.body["message"]


def test_unknown_model_raises_not_found(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-9", messages=MESSAGES)


def test_bad_parameter_raises_bad_request(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, temperature=5)
    assert "temperature" in str(e.value)


def test_context_overflow_raises_bad_request(client):
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="x", max_tokens=10_000_000)


def test_wrong_key_raises_authentication_error(base_url):
    bad = openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_embeddings_create_float_and_base64(client):
    floats = client.embeddings.create(model=MODEL, input=["In the beginning", "light"])
    assert [d.index for d in floats.data] == [0, 1]
    first = floats.data[0].embedding
    assert abs(sum(x * x for x in first) - 1.0) < 1e-4
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 0
    # The client asks for base64 by default when no format is given and decodes it itself
    # (numpy when installed); an explicit base64 request comes back as the raw string.
    raw = client.embeddings.create(model=MODEL, input="In the beginning", encoding_format="base64")
    data = base64.b64decode(raw.data[0].embedding)
    assert list(struct.unpack(f"<{len(data) // 4}f", data)) == first
    short = client.embeddings.create(model=MODEL, input="In the beginning", dimensions=8)
    assert len(short.data[0].embedding) == 8
