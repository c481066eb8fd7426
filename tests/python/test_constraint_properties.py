"""Constrained decoding against oracles nobody here wrote: random JSON Schemas with the keywords
people write (pydantic's bounds on integers and floats, string lengths, patterns, formats, enums,
array sizes, nested objects, unions) checked with the `jsonschema` package, and random regular
expressions checked with Python's `re`, on every output of a real server sampling at a high
temperature with many seeds.

The generators are seeded (`random.Random(n)`), so a failure names the case that reproduces it.
"""

import json
import random
import re

import jsonschema
import openai
import pytest
from sluice_server import MODEL_DIR, serve

MODEL = "llama"
MESSAGES = [{"role": "user", "content": "Answer in JSON."}]


@pytest.fixture(scope="module")
def client():
    with serve() as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def no_whitespace():
    # The random model would spend its budget on the whitespace the constraint still allows.
    vocab = json.loads((MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"]
    return {str(i): -100 for t, i in vocab.items() if set(t) <= {"Ġ", "Ċ", "ĉ"}}


def bound_pair(rng: random.Random, integer: bool) -> dict:
    """Random `minimum`/`maximum` (or their exclusive forms) as pydantic writes them, never an
    empty range (that is a 400, tested elsewhere)."""
    if integer:
        lo = rng.randint(-500, 400)
        hi = lo + rng.randint(2, 300)
    else:
        lo = round(rng.uniform(-500, 400), rng.randint(0, 3))
        hi = round(lo + (round(rng.uniform(0.01, 300), rng.randint(0, 3)) or 1.0), 3)
    out = {}
    if rng.random() < 0.8:
        out["minimum" if rng.random() < 0.5 else "exclusiveMinimum"] = lo
    if rng.random() < 0.8:
        out["maximum" if rng.random() < 0.5 else "exclusiveMaximum"] = hi
    return out


# Each with the length of its shortest match.
PATTERNS = {r"^[a-z]{2,5}$": 2, r"^[A-Z][0-9]{3}$": 4, r"^(ab|cd)+$": 2, r"^x-[0-9a-f]{4}$": 6,
            r"^[0-9]{1,3}(\.[0-9])?$": 1}
FORMATS = {"date": 10, "time": 9, "date-time": 20, "uuid": 36, "email": 5, "ipv4": 7}


def scalar(rng: random.Random) -> dict:
    kind = rng.choice(["integer", "number", "string", "pattern", "format", "enum", "boolean"])
    if kind in ("integer", "number"):
        return {"type": kind, **bound_pair(rng, kind == "integer")}
    if kind == "string":
        lo = rng.randint(0, 4)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randint(0, 6)}
    if kind in ("pattern", "format"):
        # Sometimes with a maxLength a little above the shortest match, where the length
        # limit can cut a text the pattern would go on with.
        text = rng.choice(list(PATTERNS) if kind == "pattern" else list(FORMATS))
        out = {"type": "string", kind: text}
        if rng.random() < 0.5:
            shortest = PATTERNS.get(text) or FORMATS[text]
            out["maxLength"] = shortest + rng.randint(0, 6)
        return out
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", "blue", 1, 2.5, None, True], rng.randint(1, 4))}
    return {"type": "boolean"}


def schema(rng: random.Random, depth: int = 0) -> dict:
    """A random object schema, up to two levels deep, with arrays and unions."""
    props = {}
    for i in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.15 and depth < 1:
            props[f"o{i}"] = schema(rng, depth + 1)
        elif roll < 0.3:
            lo = rng.randint(0, 2)
            props[f"a{i}"] = {"type": "array", "items": scalar(rng), "minItems": lo,
                              "maxItems": lo + rng.randint(0, 2)}
        elif roll < 0.4:
            props[f"u{i}"] = {"anyOf": [scalar(rng), {"type": "null"}]}
        else:
            props[f"s{i}"] = scalar(rng)
    required = [k for k in props if rng.random() < 0.7]
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


def test_every_schema_constrained_output_validates(client, no_whitespace):
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    complete = 0
    for case in range(80):
        rng = random.Random(case)
        s = schema(rng)
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": True}}
        for seed in range(3):
            r = client.chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=160, temperature=1.5, seed=seed,
                response_format=fmt, logit_bias=no_whitespace)
            text = r.choices[0].message.content
            if r.choices[0].finish_reason != "stop":
                continue
            complete += 1
            try:
                jsonschema.validate(json.loads(text), s, format_checker=checker)
            except (jsonschema.ValidationError, json.JSONDecodeError) as e:
                raise AssertionError(f"case {case} seed {seed}: {text!r} vs {json.dumps(s)}") from e
    # The oracle must have had most outputs to judge.
    assert complete >= 160, complete


def random_regex(rng: random.Random, depth: int = 0) -> str:
    """A random regular expression in the syntax Python and sluice share."""
    atoms = ["[a-c]", "[0-9]", "x", "yz", r"\.", "[A-F0-9]", "-"]
    parts = []
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.2 and depth < 2:
            inner = "|".join(random_regex(rng, depth + 1) for _ in range(rng.randint(2, 3)))
            atom = f"({inner})"
        else:
            atom = rng.choice(atoms)
        quant = rng.choice(["", "", "?", "+", "*", "{2}", "{1,3}"])
        parts.append(atom + quant)
    return "".join(parts)


def test_every_regex_constrained_output_matches(client):
    for case in range(80):
        pattern = random_regex(random.Random(case))
        for seed in range(2):
            r = client.completions.create(
                model=MODEL, prompt="Write:", max_tokens=40, temperature=1.5, seed=seed,
                extra_body={"structured_outputs": {"regex": pattern}})
            choice = r.choices[0]
            if choice.finish_reason == "stop":
                assert re.fullmatch(pattern, choice.text), (case, pattern, choice.text)
            else:
                # Cut by max_tokens: what was written still leads to a match.
                assert choice.finish_reason == "length"


def test_float_bounds_reach_pydantic_parse(client, no_whitespace):
    # pydantic's Field(ge, le, gt, lt) on floats: `.parse()` gets a valid model every time.
    import pydantic

    class Reading(pydantic.BaseModel):
        confidence: float = pydantic.Field(ge=0, le=1)
        celsius: float = pydantic.Field(gt=-273.15, lt=100.5)

    for seed in range(6):
        r = client.chat.completions.parse(
            model=MODEL, messages=MESSAGES, max_tokens=64, temperature=1.5, seed=seed,
            response_format=Reading, logit_bias=no_whitespace)
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        reading = r.choices[0].message.parsed
        assert 0 <= reading.confidence <= 1 and -273.15 < reading.celsius < 100.5, reading
