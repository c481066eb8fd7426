//! sluice's continuous-batching engine.

pub mod block_manager;
pub mod constraint;
pub mod encode_gate;
pub mod engine;
pub mod executor;
pub mod fair_share;
pub mod handle;
pub mod image_input;
pub mod images;
pub mod kv_disk;
pub mod kv_events;
pub mod metrics;
mod outbox;
pub mod output;
pub mod pool;
pub mod prompt_scoring;
pub mod queue;
pub mod request;
pub mod sampler;
pub mod scheduler;
pub mod sequence;
pub mod speculation;
pub mod step_cost;
#[cfg(test)]
mod testkit;

pub use encode_gate::{EncodeGate, EncoderTurn};
pub use engine::{Engine, EngineConfig, DEFAULT_PREFILL_SHARE, DEFAULT_STEP_TIME_TARGET};
pub use executor::{Executor, ExecutorError, ModelExecutor};
pub use fair_share::{CallerId, FairShareConfig};
pub use handle::{EngineHandle, RequestId, RequestStream, SubmitError};
pub use image_input::{
    EncodedImage, ImageEncoder, ImageFeatures, ImageGrid, ImageInput, ImagePromptError,
    PromptLayout,
};
pub use images::{ImageLayout, ImageSpan, ImageSpanError, PromptImages};
pub use metrics::{
    EngineMetrics, HistogramSnapshot, MetricsSnapshot, SpecDecodeSnapshot, StepTimes,
};
pub use request::{
    Event, FinishReason, GenerationRequest, Pooling, Priority, PromptOutputs, PromptScores,
    ResponseFormat, SamplingParams, StopRules, Task, TokenLogprob, Usage,
};
