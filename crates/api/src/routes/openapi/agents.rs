//! The agent side of `/openapi.json`: tools on chat, `/v1/responses` and Anthropic's
//! `/v1/messages`. Request schemas say what validation accepts (a request that fits them is
//! answered 200, one that breaks them 400), so schemathesis can hold the server to them;
//! dependencies JSON Schema cannot state (a named `tool_choice` must name a listed tool) are
//! in the descriptions.

use serde_json::{json, Value};

use super::operation::post;

/// Adds the agent routes and schemas to `doc`, and tools to the chat schemas.
pub(super) fn add_agents(doc: &mut Value) {
    let function = json!({"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1}, "description": {"type": "string"},
        "parameters": {"type": "object", "description": "JSON Schema of the arguments; keywords the decoder cannot enforce (pattern, minimum, ...) are not enforced"},
        "strict": {"type": "boolean"}}});
    let chat_tool = json!({"type": "object", "required": ["type", "function"], "properties": {
        "type": {"const": "function"}, "function": function}});
    let tool_choice_text = "none | auto | required, or a function named in tools; required and named force a call by constrained decoding";
    let metadata = json!({"type": "object", "maxProperties": 16,
        "propertyNames": {"maxLength": 64}, "additionalProperties": {"type": "string", "maxLength": 512},
        "description": "OpenAI's limits: 16 pairs, keys of 64 characters, values of 512"});
    let chat = &mut doc["components"]["schemas"]["ChatCompletionRequest"];
    chat["properties"]["metadata"] = metadata.clone();
    chat["properties"]["tools"] = json!({"type": "array", "items": chat_tool});
    chat["properties"]["tool_choice"] = json!({"type": "string", "enum": ["none", "auto"],
        "description": tool_choice_text});
    chat["properties"]["parallel_tool_calls"] = json!({"type": "boolean"});
    chat["properties"]["chat_template_kwargs"] = json!({"type": "object",
        "description": "extra chat-template variables, e.g. {\"enable_thinking\": false}"});
    chat["properties"]["reasoning_effort"] =
        json!({"type": "string", "enum": ["none", "minimal", "low", "medium", "high"]});
    let message = &mut doc["components"]["schemas"]["ChatMessage"]["properties"];
    message["reasoning_content"] = json!({"type": "string"});
    let choice = &mut doc["components"]["schemas"]["ChatCompletion"]["properties"]["choices"]
        ["items"]["properties"];
    choice["finish_reason"]["enum"] = json!(["stop", "length", "tool_calls"]);
    choice["message"]["properties"] = json!({"role": {"const": "assistant"},
        "content": {"type": ["string", "null"]}, "reasoning_content": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "type": {"const": "function"},
            "function": {"type": "object", "properties": {
                "name": {"type": "string"}, "arguments": {"type": "string"}}}}}}});

    doc["paths"]["/v1/responses"] = post(
        "Create a model response (OpenAI Responses API)",
        "ResponsesRequest",
        "Response",
        true,
    );
    let id = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    let found_or_404 = |summary: &str, schema: &str| {
        let mut op = post(summary, "ResponsesRequest", schema, false);
        op["post"].as_object_mut().map(|o| o.remove("requestBody"));
        op["post"]["parameters"] = id.clone();
        op["post"]["responses"]["404"]["description"] =
            json!("No stored response with this id for this API key");
        op["post"].clone()
    };
    doc["paths"]["/v1/responses/{id}"] = json!({
        "get": found_or_404("Retrieve a stored response", "Response"),
        "delete": found_or_404("Delete a stored response", "DeletedResponse"),
    });
    let mut list_items = found_or_404("List a stored response's input items", "InputItemList");
    list_items["parameters"] = json!([
        id[0].clone(),
        {"name": "limit", "in": "query", "required": false,
         "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
        {"name": "order", "in": "query", "required": false,
         "schema": {"type": "string", "enum": ["asc", "desc"], "default": "desc"}},
        {"name": "after", "in": "query", "required": false,
         "description": "an item id of this response: the items after it (none after another id)",
         "schema": {"type": "string"}},
        {"name": "include", "in": "query", "required": false, "description": "ignored",
         "schema": {"type": "array", "items": {"type": "string"}}}]);
    doc["paths"]["/v1/responses/{id}/input_items"] = json!({"get": list_items});
    doc["paths"]["/v1/messages"] = anthropic_errors(post(
        "Create a message (Anthropic Messages API)",
        "MessagesRequest",
        "Message",
        true,
    ));
    doc["paths"]["/v1/messages/count_tokens"] = anthropic_errors(post(
        "Count the tokens of a message request's prompt",
        "CountTokensRequest",
        "CountTokensResponse",
        false,
    ));

    let text_part = json!({"type": "object", "required": ["type", "text"], "properties": {
        "type": {"type": "string", "enum": ["input_text", "output_text", "text"]},
        "text": {"type": "string"}}});
    let text = json!({"oneOf": [{"type": "string"}, {"type": "array", "items": text_part}]});
    let input_image = json!({"type": "object", "required": ["type", "image_url"],
        "description": "an image in a user message, for a model whose input_modalities include image: a data URL, or an http(s) URL of a host in --allowed-media-domains",
        "properties": {"type": {"const": "input_image"}, "image_url": {"type": "string"},
            "detail": {"type": "string"}}});
    let message_content = json!({"oneOf": [{"type": "string"},
        {"type": "array", "items": {"oneOf": [text_part, input_image]}}]});
    let input_item = json!({"oneOf": [
        {"type": "object", "required": ["role", "content"], "properties": {
            "type": {"const": "message"},
            "role": {"type": "string", "enum": ["user", "system", "developer", "assistant"]},
            "content": message_content}},
        {"type": "object", "required": ["type", "call_id", "name"], "properties": {
            "type": {"const": "function_call"}, "call_id": {"type": "string"},
            "name": {"type": "string"}, "arguments": {"type": "string"}}},
        {"type": "object", "required": ["type", "call_id", "output"], "properties": {
            "type": {"const": "function_call_output"}, "call_id": {"type": "string"},
            "output": text}}]});
    let responses_tool = json!({"type": "object", "required": ["type", "name"], "properties": {
        "type": {"const": "function"}, "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"}, "parameters": {"type": "object"},
        "strict": {"type": "boolean"}}});
    let anthropic_text = json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {
        "type": "object", "required": ["type", "text"], "properties": {
            "type": {"const": "text"}, "text": {"type": "string"}}}}]});
    let anthropic_tool = json!({"type": "object", "required": ["name", "input_schema"], "properties": {
        "name": {"type": "string", "minLength": 1}, "description": {"type": "string"},
        "input_schema": {"type": "object"}}});
    let anthropic_image = json!({"type": "object", "required": ["type", "source"],
        "description": "an image in a user message, for a model whose input_modalities include image; a url source is fetched only from a host in --allowed-media-domains",
        "properties": {"type": {"const": "image"}, "source": {"type": "object", "required": ["type"],
            "properties": {"type": {"type": "string", "enum": ["base64", "url"]},
                "media_type": {"type": "string"}, "data": {"type": "string"}, "url": {"type": "string"}}}}});
    let anthropic_content = json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [
        {"type": "object", "required": ["type", "text"], "properties": {
            "type": {"const": "text"}, "text": {"type": "string"}}},
        anthropic_image]}}]});
    let anthropic_message = json!({"type": "object", "required": ["role", "content"], "properties": {
        "role": {"type": "string", "enum": ["user", "assistant"]}, "content": anthropic_content}});
    let messages_properties = json!({
        "model": {"type": ["string", "null"], "description": "a served model name; absent or null: the default model"},
        "messages": {"type": "array", "minItems": 1, "items": anthropic_message},
        "system": anthropic_text.clone(),
        "tools": {"type": "array", "items": anthropic_tool},
        "tool_choice": {"type": "object", "required": ["type"], "properties": {
            "type": {"type": "string", "enum": ["auto", "none"]},
            "disable_parallel_tool_use": {"type": "boolean"}},
            "description": "auto | any | tool (with name) | none; any and tool force a call"}});
    let mut create_message = messages_properties.clone();
    for (k, v) in json!({
        "max_tokens": {"type": "integer", "minimum": 1},
        "stop_sequences": {"type": "array", "maxItems": 16, "items": {"type": "string", "minLength": 1, "maxLength": 256}},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "top_k": {"type": "integer"},
        "stream": {"type": "boolean"},
        "metadata": {"type": "object", "properties": {"user_id": {"type": "string"}}}
    })
    .as_object()
    .into_iter()
    .chain(super::base::constraint_properties().as_object())
    .flatten()
    {
        create_message[k] = v.clone();
    }
    let usage = json!({"type": "object", "properties": {
        "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}}});
    let mut responses_request = json!({"type": "object", "required": ["input"], "properties": {
            "model": {"type": ["string", "null"], "description": "a served model name; absent or null: the default model"},
            "input": {"oneOf": [{"type": "string"},
                {"type": "array", "minItems": 1, "items": input_item}]},
            "instructions": {"type": "string"},
            "tools": {"type": "array", "items": responses_tool},
            "tool_choice": {"type": "string", "enum": ["none", "auto"], "description": tool_choice_text},
            "parallel_tool_calls": {"type": "boolean"},
            "max_output_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "stream": {"type": "boolean"},
            "store": {"type": "boolean", "description": "keep the response (default true) for previous_response_id and GET, per API key, bounded in number, age and bytes (per key and in total); a request too large to keep is a 400, a response whose output makes it too large comes back with store false"},
            "previous_response_id": {"type": "string", "description": "a stored response of this API key; unknown ids are a 404"},
            "reasoning": {"type": "object", "properties": {"effort": {"type": "string",
                "enum": ["none", "minimal", "low", "medium", "high"]}}},
            "metadata": metadata,
            "user": {"type": "string"}}});
    for (k, v) in super::base::constraint_properties()
        .as_object()
        .into_iter()
        .flatten()
    {
        responses_request["properties"][k] = v.clone();
    }
    let schemas = json!({
        "ResponsesRequest": responses_request,
        "Response": {"type": "object", "properties": {
            "id": {"type": "string"}, "object": {"const": "response"},
            "created_at": {"type": "integer"}, "model": {"type": "string"},
            "status": {"type": "string", "enum": ["completed", "incomplete", "failed", "in_progress"]},
            "output": {"type": "array", "items": {"type": "object", "properties": {
                "type": {"type": "string", "enum": ["message", "function_call", "reasoning"]}}}},
            "usage": {"type": ["object", "null"]}}},
        "InputItemList": {"type": "object",
            "required": ["object", "data", "first_id", "last_id", "has_more"], "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object", "required": ["id", "type"],
                "properties": {"id": {"type": "string"}, "type": {"type": "string",
                    "enum": ["message", "function_call", "function_call_output", "reasoning"]}}}},
            "first_id": {"type": ["string", "null"]}, "last_id": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"}}},
        "DeletedResponse": {"type": "object", "properties": {
            "id": {"type": "string"}, "object": {"const": "response"}, "deleted": {"const": true}}},
        "MessagesRequest": {"type": "object", "required": ["messages", "max_tokens"],
            "properties": create_message},
        "CountTokensRequest": {"type": "object", "required": ["messages"],
            "properties": messages_properties},
        "Message": {"type": "object", "properties": {
            "id": {"type": "string"}, "type": {"const": "message"}, "role": {"const": "assistant"},
            "model": {"type": "string"},
            "content": {"type": "array", "items": {"type": "object", "properties": {
                "type": {"type": "string", "enum": ["text", "thinking", "tool_use"]}}}},
            "stop_reason": {"type": ["string", "null"],
                "enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use", null]},
            "usage": usage}},
        "CountTokensResponse": {"type": "object", "required": ["input_tokens"], "properties": {
            "input_tokens": {"type": "integer"}}},
        "AnthropicError": {"type": "object", "required": ["type", "error"], "properties": {
            "type": {"const": "error"},
            "error": {"type": "object", "required": ["type", "message"], "properties": {
                "type": {"type": "string"}, "message": {"type": "string"}}}}}
    });
    if let (Some(all), Value::Object(agents)) =
        (doc["components"]["schemas"].as_object_mut(), schemas)
    {
        all.extend(agents);
    }
}

/// `operation` with its error bodies in Anthropic's shape.
fn anthropic_errors(mut operation: Value) -> Value {
    let error = json!({"$ref": "#/components/schemas/AnthropicError"});
    if let Some(responses) = operation["post"]["responses"].as_object_mut() {
        for (status, response) in responses.iter_mut() {
            if status != "200" {
                response["content"]["application/json"]["schema"] = error.clone();
            }
        }
    }
    operation
}
