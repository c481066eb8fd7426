//! sluice's continuous-batching engine.

pub mod request;

pub use request::{
    Event, FinishReason, GenerationRequest, Priority, SamplingParams, StopRules, TokenLogprob,
    Usage,
};
