//! sluice's model runtime: Hugging Face configs and weights, one file per architecture built from
//! shared layers, CPU kernels, and the paged KV storage the forward pass reads and writes.

pub mod batch;

pub use batch::{Batch, Logits, SeqBatch};
