"""Images through the real clients against a real `sluice serve` of the Qwen2.5-VL fixture
(fixtures/models/qwen2_5-vl, random weights, its own chat template): the official `openai`
client (chat `image_url` parts, Responses `input_image`), the `anthropic` client (base64
`image` blocks) and the OpenAI Agents SDK with an image in its input. Each gives transformers'
greedy continuation of the fixture's reference prompt (reference.json, decoded with `tokenizers`),
so the image really reached the model: another image changes the answer.
"""

import base64
import json

import anthropic
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from openai import AsyncOpenAI, OpenAI
from sluice_server import ROOT, serve
from tokenizers import Tokenizer

FIXTURE = ROOT / "fixtures" / "models" / "qwen2_5-vl"
MODEL = "qwen2_5-vl"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
QUESTION = "Describe this picture."

set_tracing_disabled(True)


def image_b64(name):
    return base64.b64encode((FIXTURE / "images" / name).read_bytes()).decode()


IMAGE = REFERENCE["prompt"]["images"][0]
OTHER = "rgb_120x120.png"


def expected_text():
    tokenizer = Tokenizer.from_file(str(FIXTURE / "tokenizer.json"))
    return tokenizer.decode(REFERENCE["prompt"]["greedy_tokens"], skip_special_tokens=True)


TOKENS = len(REFERENCE["prompt"]["greedy_tokens"])


@pytest.fixture(scope="module")
def url():
    with serve(model_dir=FIXTURE) as url:
        yield url


def chat_answer(client, image):
    reply = client.chat.completions.create(
        model=MODEL, max_tokens=TOKENS, temperature=0,
        extra_body={"ignore_eos": True},
        messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image_b64(image)}"}},
            {"type": "text", "text": QUESTION},
        ]}],
    )
    return reply


def test_openai_chat_with_an_image_gives_the_reference_continuation(url):
    client = OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    reply = chat_answer(client, IMAGE)
    assert reply.choices[0].message.content == expected_text()
    assert reply.usage.prompt_tokens == len(REFERENCE["prompt"]["input_ids"])
    assert chat_answer(client, OTHER).choices[0].message.content != expected_text()


def test_openai_responses_with_an_input_image_gives_the_reference_continuation(url):
    client = OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    response = client.responses.create(
        model=MODEL, max_output_tokens=TOKENS, temperature=0,
        extra_body={"ignore_eos": True},
        input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": f"data:image/png;base64,{image_b64(IMAGE)}"},
            {"type": "input_text", "text": QUESTION},
        ]}],
    )
    assert response.output_text == expected_text()


def test_anthropic_image_block_gives_the_reference_continuation(url):
    client = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)
    message = client.messages.create(
        model=MODEL, max_tokens=TOKENS,
        extra_body={"ignore_eos": True, "temperature": 0},
        messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": image_b64(IMAGE)}},
            {"type": "text", "text": QUESTION},
        ]}],
    )
    assert message.content[0].text == expected_text()
    # The earlier tests' prompts are in the prefix cache: Anthropic counts those apart.
    usage = message.usage
    read = usage.cache_read_input_tokens or 0
    assert usage.input_tokens + read == len(REFERENCE["prompt"]["input_ids"])


def test_an_agent_with_an_image_in_its_input_answers_from_it(url):
    client = AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    agent = Agent(
        name="viewer",
        # Chat completions: the Responses model takes a reply cut at its token limit (the
        # reference's length, the eos ignored) as a failed run.
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(max_tokens=TOKENS, temperature=0,
                                     extra_body={"ignore_eos": True}),
    )
    run = [{"role": "user", "content": [
        {"type": "input_image", "image_url": f"data:image/png;base64,{image_b64(IMAGE)}",
         "detail": "auto"},
        {"type": "input_text", "text": QUESTION},
    ]}]
    result = Runner.run_sync(agent, run, max_turns=1, run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == expected_text()
