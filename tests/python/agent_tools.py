"""The tools the Responses and Anthropic tests offer the fixture model, with real-agent-like
schemas (pattern, minimum/maximum, enum, arrays), and the sampling nudges a random-weight model
needs: the quote token (6) biased so strings close, newlines (203) banned where text is compared;
and `enforced`, a schema less the value assertions tool-call constraints leave out."""

NUDGE = {"logit_bias": {"6": 8}}
# Left alone the fixture model writes only newlines (token 203); text worth comparing has none.
NO_NEWLINES = {"logit_bias": {"203": -100}}

# name -> (description, JSON Schema of the arguments)
SCHEMAS = {
    "read_file": (
        "Read a text file from the workspace",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "pattern": "^/", "maxLength": 24,
                         "description": "An absolute path"},
                "start_line": {"type": "integer", "minimum": 1},
                "encoding": {"type": "string", "enum": ["utf-8", "latin-1"]},
            },
            "required": ["path", "encoding"],
            "additionalProperties": False,
        },
    ),
    "run_command": (
        "Run a command in the sandbox",
        {
            "type": "object",
            "properties": {
                "argv": {"type": "array", "items": {"type": "string", "minLength": 1},
                         "minItems": 1, "maxItems": 8},
                "cwd": {"type": "string", "pattern": "^/", "maxLength": 24},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600},
                "shell": {"type": "string", "enum": ["bash", "sh"]},
            },
            "required": ["argv", "shell"],
            "additionalProperties": False,
        },
    ),
}


def responses_tool(name):
    """The tool as the Responses API declares a function."""
    description, schema = SCHEMAS[name]
    return {"type": "function", "name": name, "description": description, "parameters": schema}


def anthropic_tool(name):
    """The tool as Anthropic's Messages API declares it."""
    description, schema = SCHEMAS[name]
    return {"name": name, "description": description, "input_schema": schema}


# The constraint holds calls to the schema's structure (types, properties, required,
# additionalProperties, items, minItems/maxItems, enum) but by design drops value assertions
# (crates/text/src/constraint/schema/relax.rs), which random weights then break (`"path": ""`).
# Integer bounds, string lengths and patterns are enforced (the patterns' strings are bounded
# here: under `^/` alone random weights wander to max_tokens); nothing here is left out now.
UNENFORCED = set()


def enforced(schema):
    """`schema` without the value assertions the constraint leaves out."""
    out = {k: v for k, v in schema.items() if k not in UNENFORCED}
    if "properties" in out:
        out["properties"] = {name: enforced(s) for name, s in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = enforced(out["items"])
    return out
