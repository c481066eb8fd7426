"""LangChain's `ChatOpenAI` (`langchain-openai`) against a real `sluice serve`: its
`with_structured_output` on a pydantic model with bounded fields (the JSON schema method,
OpenAI's `response_format` with `strict`), and tool binding with a forced call, as LangChain
users write them. Every answer parses into the model with its bounds kept, for several seeds.
"""

import pydantic
import pytest
from langchain_openai import ChatOpenAI
from sluice_server import TOOLS_MODEL_DIR, serve

MODEL = "llama-tools"


@pytest.fixture(scope="module")
def url():
    with serve(model_dir=TOOLS_MODEL_DIR) as url:
        yield url + "/v1"


class Person(pydantic.BaseModel):
    """Someone described in the text."""

    name: str = pydantic.Field(min_length=1, max_length=10)
    age: int = pydantic.Field(ge=0, le=120)
    height_m: float = pydantic.Field(gt=0.3, lt=2.5)


def chat(url: str, seed: int, **kwargs) -> ChatOpenAI:
    # No newlines (token 203): the random model would spend its budget on them.
    return ChatOpenAI(model=MODEL, base_url=url, api_key="none", max_retries=0, temperature=1.0,
                      max_tokens=200, seed=seed, logit_bias={203: -100}, **kwargs)


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_with_structured_output_parses_a_bounded_model(url, method):
    for seed in range(3):
        structured = chat(url, seed).with_structured_output(Person, method=method, strict=True)
        person = structured.invoke("Alice is 31 and 1.68 m tall.")
        assert isinstance(person, Person), person
        assert 0 <= person.age <= 120 and 0.3 < person.height_m < 2.5, person
        assert 1 <= len(person.name) <= 10, person
