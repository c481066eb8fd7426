use super::*;
use serde_json::json;

const CHATML: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// The shape of Llama 3's template: bos_token first, header ids, trimmed content, and
/// trim_blocks/lstrip_blocks doing the whitespace work.
const LLAMA3_STYLE: &str = r#"{{- bos_token }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"#;

const ROLE_CHECKED: &str = "{% for message in messages %}\
{% if message.role not in ['user', 'assistant'] %}\
{{ raise_exception('Conversation roles must be user or assistant, got ' + message.role) }}\
{% endif %}{{ message.role }}: {{ message.content }}\n{% endfor %}";

fn conversation() -> Json {
    json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "What is 2+2?"}
    ])
}

#[test]
fn chatml_renders_every_message_and_the_generation_prompt() {
    let template = ChatTemplate::new(CHATML, None, None).unwrap();
    let text = template.render(&conversation(), true, None).unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nYou are terse.<|im_end|>\n\
         <|im_start|>user\nHi there<|im_end|>\n\
         <|im_start|>assistant\nHello.<|im_end|>\n\
         <|im_start|>user\nWhat is 2+2?<|im_end|>\n\
         <|im_start|>assistant\n"
    );
    let without_prompt = template.render(&conversation(), false, None).unwrap();
    assert!(without_prompt.ends_with("What is 2+2?<|im_end|>\n"));
}

#[test]
fn llama3_style_template_starts_with_bos_and_trims_blocks() {
    let template = ChatTemplate::new(
        LLAMA3_STYLE,
        Some("<|begin_of_text|>".into()),
        Some("<|eot_id|>".into()),
    )
    .unwrap();
    let messages = json!([
        {"role": "system", "content": "  Be brief.  "},
        {"role": "user", "content": "Hi"}
    ]);
    let text = template.render(&messages, true, None).unwrap();
    assert_eq!(
        text,
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn raise_exception_for_a_bad_role_is_a_template_error_with_the_templates_message() {
    let template = ChatTemplate::new(ROLE_CHECKED, None, None).unwrap();
    let err = template.render(&conversation(), true, None).unwrap_err();
    match err {
        TextError::Template(message) => assert_eq!(
            message,
            "Conversation roles must be user or assistant, got system"
        ),
        other => panic!("expected a template error, got {other:?}"),
    }
    let ok = template
        .render(&json!([{"role": "user", "content": "x"}]), false, None)
        .unwrap();
    assert_eq!(ok, "user: x\n");
}

#[test]
fn syntax_error_is_reported_when_compiling() {
    let err = ChatTemplate::new("{% for m in messages %}{{ m.content }}", None, None).unwrap_err();
    assert!(
        matches!(err, TextError::Template(ref m) if m.contains("syntax")),
        "{err}"
    );
}

#[test]
fn missing_special_tokens_are_undefined_like_in_transformers() {
    let template = ChatTemplate::new(
        "{{ bos_token is defined }} {{ eos_token is defined }}",
        None,
        Some("</s>".into()),
    )
    .unwrap();
    assert_eq!(
        template.render(&json!([]), false, None).unwrap(),
        "False True"
    );
}

#[test]
fn content_given_as_text_parts_is_joined_into_one_string() {
    let template = ChatTemplate::new(CHATML, None, None).unwrap();
    let messages = json!([{"role": "user", "content": [
        {"type": "text", "text": "first"},
        {"type": "text", "text": "second"}
    ]}]);
    let text = template.render(&messages, false, None).unwrap();
    assert_eq!(text, "<|im_start|>user\nfirst\nsecond<|im_end|>\n");
}

#[test]
fn non_text_content_parts_are_rejected() {
    let template = ChatTemplate::new(CHATML, None, None).unwrap();
    let messages = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}
    ]}]);
    let err = template.render(&messages, false, None).unwrap_err();
    assert!(matches!(err, TextError::InvalidMessages(ref m) if m.contains("image_url")));
}

#[test]
fn messages_must_be_an_array_of_objects() {
    let template = ChatTemplate::new(CHATML, None, None).unwrap();
    assert!(matches!(
        template.render(&json!({"role": "user"}), false, None),
        Err(TextError::InvalidMessages(_))
    ));
    assert!(matches!(
        template.render(&json!(["hi"]), false, None),
        Err(TextError::InvalidMessages(_))
    ));
}

#[test]
fn tools_are_written_as_python_json_in_the_clients_key_order() {
    let template = ChatTemplate::new(
        "{% if tools %}{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}{% endif %}",
        None,
        None,
    )
    .unwrap();
    let tools: Json = serde_json::from_str(
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]"#,
    )
    .unwrap();
    let text = template.render(&json!([]), false, Some(&tools)).unwrap();
    assert_eq!(
        text,
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}}\n"
    );
    assert_eq!(template.render(&json!([]), false, None).unwrap(), "");
}

#[test]
fn tojson_accepts_indent_ensure_ascii_separators_and_sort_keys() {
    let render = |source: &str| {
        let template = ChatTemplate::new(source, None, None).unwrap();
        let messages = json!([{"role": "user", "content": "日本", "b": 1}]);
        template.render(&messages, false, None)
    };
    assert_eq!(
        render("{{ messages[0] | tojson(indent=2) }}").unwrap(),
        "{\n  \"role\": \"user\",\n  \"content\": \"日本\",\n  \"b\": 1\n}"
    );
    assert_eq!(
        render("{{ messages[0].content | tojson(ensure_ascii=True) }}").unwrap(),
        "\"\\u65e5\\u672c\""
    );
    assert_eq!(
        render("{{ messages[0] | tojson(separators=[',', ':'], sort_keys=true) }}").unwrap(),
        "{\"b\":1,\"content\":\"日本\",\"role\":\"user\"}"
    );
    assert!(matches!(
        render("{{ messages | tojson(colour=1) }}"),
        Err(TextError::Template(_))
    ));
}

#[test]
fn strftime_now_formats_the_current_local_date() {
    let template = ChatTemplate::new("{{ strftime_now('%Y-%m-%d') }}", None, None).unwrap();
    let before = chrono::Local::now().format("%Y-%m-%d").to_string();
    let text = template.render(&json!([]), false, None).unwrap();
    let after = chrono::Local::now().format("%Y-%m-%d").to_string();
    assert!(text == before || text == after, "{text}");
}

#[test]
fn strftime_now_with_an_invalid_format_is_an_error_not_a_panic() {
    let template = ChatTemplate::new("{{ strftime_now('%Q') }}", None, None).unwrap();
    assert!(matches!(
        template.render(&json!([]), false, None),
        Err(TextError::Template(_))
    ));
}

#[test]
fn loop_controls_namespaces_and_python_methods_work() {
    let source = "{% set ns = namespace(last_user=-1) %}\
{% for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}\
{% for m in messages %}{% if loop.index0 > ns.last_user %}{% break %}{% endif %}\
{% if m.role == 'system' %}{% continue %}{% endif %}\
[{{ m.content.strip().upper() }}|{{ m.get('name', 'anon') }}]{% endfor %}\
{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let messages = json!([
        {"role": "system", "content": "sys"},
        {"role": "user", "content": " hi ", "name": "ann"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "later"}
    ]);
    assert_eq!(
        template.render(&messages, false, None).unwrap(),
        "[HI|ann][YO|anon][BYE|anon]role=system;content=sys;"
    );
}

#[test]
fn generation_tags_render_their_content_unchanged() {
    let source = "{% for m in messages %}{% if m.role == 'assistant' %}\
{%- generation -%}{{ m.content }}{%- endgeneration -%}{% else %}{{ m.content }}{% endif %}|{% endfor %}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let messages = json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]);
    assert_eq!(template.render(&messages, false, None).unwrap(), "a|b|");
}

#[test]
fn extra_kwargs_reach_the_template() {
    let source = "{% if enable_thinking is defined and not enable_thinking %}no-think{% endif %}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let kwargs = json!({"enable_thinking": false});
    let text = template
        .render_with_kwargs(&json!([]), true, None, Some(&kwargs))
        .unwrap();
    assert_eq!(text, "no-think");
    assert_eq!(template.render(&json!([]), true, None).unwrap(), "");
}

#[test]
fn chat_template_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ChatTemplate>();
}

#[test]
fn printed_values_and_the_string_filter_follow_python() {
    let source = "{{ none }} {{ messages[0] }} {{ messages | string }} {{ 3 | string }}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let messages = json!([{"role": "user", "content": "it's", "n": 1.5, "ok": true}]);
    assert_eq!(
        template.render(&messages, false, None).unwrap(),
        "None {'role': 'user', 'content': \"it's\", 'n': 1.5, 'ok': True} \
         [{'role': 'user', 'content': \"it's\", 'n': 1.5, 'ok': True}] 3"
    );
}

#[test]
fn none_is_not_iterable() {
    let source = "{% if tools is iterable and tools | length > 0 %}tools{% else %}none{% endif %}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    assert_eq!(template.render(&json!([]), false, None).unwrap(), "none");
    let tools = json!([{"type": "function"}]);
    assert_eq!(
        template.render(&json!([]), false, Some(&tools)).unwrap(),
        "tools"
    );
}

/// Kimi K2's pattern: ids queued in a namespace list as calls are rendered, popped from the
/// front by the tool results that answer them.
#[test]
fn namespace_lists_take_append_and_pop_as_in_python() {
    let source = "{%- set queue = namespace(ids=[], n=0) -%}\
{%- for m in messages -%}\
{%- if m.role == 'assistant' -%}{%- for c in m.tool_calls -%}\
{%- set _ = queue.ids.append(c.function.name ~ ':' ~ loop.index0) -%}[call {{ queue.ids[-1] }}]\
{%- endfor -%}\
{%- elif m.role == 'tool' -%}[result of {{ queue.ids.pop(0) }}: {{ m.content }}]\
{%- else -%}[{{ m.role }}]{%- endif -%}\
{%- endfor -%}[left {{ queue.ids | length }}{{ ' ' ~ (queue.ids | tojson) if queue.ids }}]";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let call =
        |name: &str| json!({"type": "function", "function": {"name": name, "arguments": "{}"}});
    let messages = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b"), call("c")]},
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
    ]);
    assert_eq!(
        template.render(&messages, false, None).unwrap(),
        "[user][call a:0][call b:1][call c:2][result of a:0: 1][result of b:1: 2][left 1 [\"c:2\"]]"
    );
    // Popping an empty list is the template's error, not a panic.
    let empty = ChatTemplate::new(
        "{% set q = namespace(ids=[]) %}{{ q.ids.pop() }}",
        None,
        None,
    );
    let err = empty.unwrap().render(&json!([]), false, None).unwrap_err();
    assert!(err.to_string().contains("pop from empty list"), "{err}");
}
