//! End-to-end tests of the OpenAI-compatible HTTP API: the real router over the real engine and
//! the tiny fixture model, spoken to over real HTTP on an ephemeral loopback port.

mod agents;
mod browsers;
mod chat;
mod completions;
mod context_limits;
mod custom_tools;
mod errors;
mod fair_share;
mod hardening;
mod images;
mod images_by_url;
mod images_protocols;
mod images_qwen;
mod keep_alive;
mod messages_turns;
#[path = "../support/metrics.rs"]
mod metrics;
mod model_names;
mod model_task;
mod operations;
mod prompt_logprobs;
mod render;
mod scoring;
mod scoring_admission;
mod server;
mod slow_clients;
mod speculation;
mod stored_responses;
mod structured_outputs;
mod template_budget;
mod tool_cut;
