"""The OpenAI Agents SDK (`openai-agents`, imported as `agents`) running an agent with a
function tool against a real `sluice serve`, through the Responses API and through chat
completions.

The fixture model has random weights: it never calls a tool by itself, so the first turn is
forced with `tool_choice="required"` (the SDK resets it after a tool call, so the next turn
answers in text) and nudged by a `logit_bias` towards `"` (token 6) so its strings close.
"""

import json

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ToolCallItem, ToolCallOutputItem
from openai import AsyncOpenAI
from sluice_server import TOOLS_MODEL_DIR, serve

MODEL = "llama-tools"
API_KEY = "agent-key"

# `"` (6) up so strings close; no newlines (203), which the model would write until the
# limit; the end of turn (`<|im_end|>`, 3) up so the text turn ends before the limit (the
# SDK takes a Responses `incomplete` as a failure). The constraint keeps the end of turn
# out of a forced call until the call is complete.
ANSWER_BIAS = {"6": 8, "203": -100, "3": 15}

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def url():
    with serve("--api-key", API_KEY, model_dir=TOOLS_MODEL_DIR) as url:
        yield url + "/v1"


def run_agent(model_class, url, seed):
    """Runs a one-tool agent to completion; returns the run and the tool's recorded calls."""
    calls = []

    @function_tool
    def lookup_weather(city: str, unit: str) -> str:
        """Current weather in a city.

        Args:
            city: The city's name.
            unit: celsius or fahrenheit.
        """
        calls.append({"city": city, "unit": unit})
        return f"21 degrees {unit} in {city}"

    client = AsyncOpenAI(base_url=url, api_key=API_KEY, max_retries=0)
    agent = Agent(
        name="weather",
        instructions="Answer weather questions with the lookup_weather tool.",
        tools=[lookup_weather],
        model=model_class(model=MODEL, openai_client=client),
        model_settings=ModelSettings(
            tool_choice="required", max_tokens=400,
            extra_body={"logit_bias": ANSWER_BIAS, "seed": seed},
        ),
    )
    result = Runner.run_sync(agent, "What is the weather in Paris?", max_turns=4,
                             run_config=RunConfig(tracing_disabled=True))
    return result, calls


@pytest.mark.parametrize("model_class", [OpenAIResponsesModel, OpenAIChatCompletionsModel])
def test_an_agent_calls_its_tool_and_answers(url, model_class):
    result, calls = run_agent(model_class, url, seed=2)
    # The tool ran once, with arguments its signature accepts (strings both).
    assert len(calls) == 1, calls
    assert all(isinstance(v, str) for v in calls[0].values())
    [call_item] = [i for i in result.new_items if isinstance(i, ToolCallItem)]
    assert call_item.raw_item.name == "lookup_weather"
    assert json.loads(call_item.raw_item.arguments) == calls[0]
    [output_item] = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert output_item.output == f"21 degrees {calls[0]['unit']} in {calls[0]['city']}"
    # The second turn answered in text, which ended the run.
    assert isinstance(result.final_output, str) and result.final_output
    assert len(result.raw_responses) == 2
    assert result.raw_responses[-1].output, "the final turn produced output"



@pytest.mark.parametrize("model_class", [OpenAIResponsesModel, OpenAIChatCompletionsModel])
def test_an_agent_with_a_bounded_output_type_gets_a_valid_final_output(url, model_class):
    # output_type on a pydantic model with Field(ge, le, gt, lt) and a length limit: the SDK
    # sends the strict JSON schema (text.format / response_format) and parses the answer into
    # the model; the bounds are enforced while decoding, so every seed parses.
    import pydantic

    class Forecast(pydantic.BaseModel):
        day: int = pydantic.Field(ge=1, le=7)
        chance_of_rain: float = pydantic.Field(ge=0, le=1)
        high_c: float = pydantic.Field(gt=-60, lt=60)
        summary: str = pydantic.Field(max_length=12)

    client = AsyncOpenAI(base_url=url, api_key=API_KEY, max_retries=0)
    for seed in range(3):
        agent = Agent(
            name="forecaster", instructions="Give the forecast.", output_type=Forecast,
            model=model_class(model=MODEL, openai_client=client),
            model_settings=ModelSettings(
                max_tokens=200, extra_body={"logit_bias": {"203": -100}, "seed": seed}),
        )
        result = Runner.run_sync(agent, "Forecast for Paris?", max_turns=1,
                                 run_config=RunConfig(tracing_disabled=True))
        forecast = result.final_output
        assert isinstance(forecast, Forecast), forecast
        assert 1 <= forecast.day <= 7 and 0 <= forecast.chance_of_rain <= 1, forecast
        assert -60 < forecast.high_c < 60 and len(forecast.summary) <= 12, forecast
