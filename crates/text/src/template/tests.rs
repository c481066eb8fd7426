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

// --- The render budget (budget.rs): a template is untrusted code. ---

fn budget_error(template: &ChatTemplate) -> (String, std::time::Duration) {
    let started = std::time::Instant::now();
    let err = template.render(&conversation(), true, None).unwrap_err();
    let TextError::Template(message) = err else {
        panic!("expected a template error, got {err:?}");
    };
    (message, started.elapsed())
}

/// Two nested `range(100000)` loops run 10^10 iterations: fuel stops them, with the default
/// limits, well within a second or so.
#[test]
fn nested_range_loops_run_out_of_fuel() {
    let source = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let (message, took) = budget_error(&template);
    assert_eq!(
        message,
        format!(
            "chat template exceeded its budget of {} instructions",
            RenderLimits::default().fuel
        )
    );
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
}

/// `ns.s ~ ns.s` 64 times asks for 2^64 bytes; it stops at the byte limit (64 MiB), before the
/// string doubles past it.
#[test]
fn string_doubling_stops_at_the_byte_limit() {
    let limit = RenderLimits::default().max_bytes;
    let sources = [
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
        "{% macro d(s, n) %}{{ d(s ~ s, n - 1) if n else s | length }}{% endmacro %}{{ d('x', 64) }}",
        // A variable, not a literal: minijinja folds constant expressions when it compiles.
        "{% set n = 100000000 %}{{ 'x' * n }}",
        "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('x', ns.s) %}{% endfor %}",
        "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s | replace('x', ns.s) %}{% endfor %}",
        "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = [ns.s, ns.s] | join %}{% endfor %}",
        "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s.join([ns.s, ns.s]) %}{% endfor %}",
        "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = '%s%s' | format(ns.s, ns.s) %}{% endfor %}",
    ];
    for source in sources {
        let template = ChatTemplate::new(source, None, None).unwrap();
        let (message, took) = budget_error(&template);
        assert_eq!(
            message,
            format!("chat template built a string over its limit of {limit} bytes"),
            "{source}"
        );
        assert!(
            took < std::time::Duration::from_secs(10),
            "{source}: {took:?}"
        );
    }
}

/// A list holding one large string many times is small in memory and huge written out.
#[test]
fn writing_out_a_list_of_one_large_string_is_refused_before_it_is_built() {
    let limit = RenderLimits::default().max_bytes;
    for source in [
        "{% set s = 'x' * 1000000 %}{{ ([s] * 1000) | join }}",
        "{% set s = 'x' * 1000000 %}{{ [s] * 1000 }}",
        "{% set s = 'x' * 1000000 %}{{ ([s] * 1000) | tojson }}",
        "{% set s = 'x' * 1000000 %}{{ ([s] * 1000) | string }}",
        "{% set s = 'x' * 1000000 %}{{ ([s] * 1000) ~ '' }}",
    ] {
        let template = ChatTemplate::new(source, None, None).unwrap();
        let (message, _) = budget_error(&template);
        assert_eq!(
            message,
            format!("chat template built a string over its limit of {limit} bytes"),
            "{source}"
        );
    }
    let doubling = "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}";
    let template = ChatTemplate::new(doubling, None, None).unwrap();
    let (message, _) = budget_error(&template);
    assert_eq!(
        message,
        format!(
            "chat template built a list over its limit of {} items",
            RenderLimits::default().max_items
        )
    );
}

/// Raw text in a loop counts against the byte limit like printed values do.
#[test]
fn the_rendered_prompt_is_capped() {
    let limits = RenderLimits {
        max_bytes: 1000,
        ..RenderLimits::default()
    };
    for source in [
        "{% for i in range(100000) %}raw text {% endfor %}",
        "{% for i in range(100000) %}{{ i }}{% endfor %}",
        "{% set x %}{% for i in range(100000) %}raw text {% endfor %}{% endset %}",
    ] {
        let template = ChatTemplate::new(source, None, None)
            .unwrap()
            .with_limits(limits.clone());
        let (message, _) = budget_error(&template);
        assert_eq!(
            message, "rendered prompt exceeded its limit of 1000 bytes",
            "{source}"
        );
    }
}

#[test]
fn a_macro_calling_itself_stops_at_the_recursion_limit() {
    let source = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let (message, _) = budget_error(&template);
    assert!(message.contains("recursion limit"), "{message}");
}

#[test]
fn a_huge_range_is_refused() {
    let template = ChatTemplate::new("{{ range(10000000000) | length }}", None, None).unwrap();
    let (message, took) = budget_error(&template);
    assert!(message.contains("range"), "{message}");
    assert!(took < std::time::Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_render_past_its_deadline_stops() {
    let limits = RenderLimits {
        fuel: u64::MAX / 4,
        timeout: std::time::Duration::from_millis(200),
        ..RenderLimits::default()
    };
    let source = "{% for a in range(100000) %}{% for b in range(100000) %}{{ '' ~ b }}{% endfor %}{% endfor %}";
    let template = ChatTemplate::new(source, None, None)
        .unwrap()
        .with_limits(limits);
    let (message, took) = budget_error(&template);
    assert_eq!(message, "chat template took longer than its limit of 0.2 s");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_cancelled_render_stops() {
    let source = "{% for a in range(100000) %}{{ a }}{% endfor %}";
    let template = ChatTemplate::new(source, None, None).unwrap();
    let cancel = Arc::new(AtomicBool::new(true));
    let err = template
        .render_cancellable(&conversation(), true, None, None, Some(cancel))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        TextError::Template("rendering was cancelled: the client went away".into()).to_string()
    );
}

/// The rewritten program (`~`, `+`, `*` and raw text through the budget's checks, jumps moved)
/// renders what minijinja renders unrewritten.
#[test]
fn the_guarded_program_renders_what_minijinja_renders() {
    let sources = [
        "a{{ 1 ~ 2 ~ none ~ 'x' }}b{{ [1, 'a'] ~ {'k': 2} }}",
        "{{ 1 + 2 }} {{ 1.5 + 2 }} {{ 'a' + 'b' }} {{ ([1] + [2, 3]) | join(',') }} {{ -3 * 2 }} {{ 'ab' * 3 }} {{ ([1, 2] * 2) | length }}",
        "{% for m in messages %}{% if loop.first %}first {% endif %}{{ m.role ~ ':' ~ m.content }}{% if not loop.last %}, {% endif %}{% else %}none{% endfor %}",
        "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
        "{% macro row(a, b=2) %}<{{ a + b }}|{{ caller() if caller else '' }}>{% endmacro %}{{ row(1) }}{% call row(3, 4) %}inner {{ 5 * 5 }}{% endcall %}",
        "{% set tree = [{'n': 'a', 'c': [{'n': 'b', 'c': []}]}] %}{% for t in tree recursive %}{{ t.n }}({{ loop(t.c) }}){% endfor %}",
        "{% set x %}cap{{ 1 + 1 }}tured{% endset %}{{ x | upper }} {% filter upper %}shout {{ 'it' ~ '!' }}{% endfilter %}",
        "{{ 'yes' if 1 + 1 == 2 else 'no' }} {{ true and 'a' ~ 'b' }} {{ false or 'c' + 'd' }} {{ [1, 2, 3][1:] | join }}",
        "{{ '%s-%s' | format('a', 1) }} {{ 'a,b' | replace(',', ';') }} {{ 'x\ny' | indent(2, true) }} {{ ' s '.strip().replace('s', 'tt') }} {{ '-'.join(['a', 'b']) }}",
    ];
    for source in sources {
        let messages =
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]);
        let ours = ChatTemplate::new(source, None, None)
            .unwrap()
            .render(&messages, false, None)
            .unwrap();
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        let theirs = env
            .render_str(
                source,
                minijinja::context! { messages => Value::from_serialize(&messages) },
            )
            .unwrap();
        assert_eq!(ours, theirs, "{source}");
    }
}

#[test]
fn a_render_reports_the_fuel_and_bytes_it_used() {
    let template = ChatTemplate::new(CHATML, None, None).unwrap();
    let (text, usage) = template
        .render_measured(&conversation(), true, None, None, None)
        .unwrap();
    assert!(usage.fuel > 10 && usage.fuel < 10_000, "{usage:?}");
    assert_eq!(usage.written, text.len());
}
