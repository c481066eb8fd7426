//! sluice's model runtime: Hugging Face configs and weights, one file per architecture built from
//! shared layers, CPU kernels, and the paged KV storage the forward pass reads and writes.
//!
//! ```text
//! Model::load(dir, opts) ──► ModelConfig + Decoder (packed weights)
//! Model::forward(&Batch, &mut KvCache) ──► Logits for batch.logits_indices
//! ```

pub mod architectures;
pub mod batch;
pub mod checkpoint;
pub mod config;
pub mod decoder;
pub mod error;
pub mod files;
pub mod gguf;
pub mod kernels;
pub mod kv_cache;
pub mod kv_layout;
pub mod layers;
pub mod model;
pub mod moe_config;
pub mod mrope;
pub mod plan;
pub mod pooling;
pub mod vision;

pub use batch::{Batch, InputEmbeddings, Logits, SeqBatch, RELEASED_BLOCK};
pub use checkpoint::{Checkpoint, RawTensor, TensorSource};
pub use config::{LongRope, ModelConfig, RopeConfig, RopeScaling};
pub use error::{ForwardError, LoadError};
pub use files::ModelFiles;
pub use kernels::matmul::WeightDtype;
pub use kv_cache::KvCache;
pub use kv_layout::{KvDemand, KvDtype, KvGroupId, KvLayout, KvPool, KvPools, KvSpan, FULL_GROUP};
pub use model::{LoadOptions, Model};
pub use mrope::{prompt_positions, MropeError, MropePositions, PromptImage};
pub use pooling::{pooling_of, Pooling};
