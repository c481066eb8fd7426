//! CPU kernels: plain functions over slices, each with a fixed reduction order so results never
//! depend on how a batch is composed.

pub mod dot;
pub mod matmul;
pub mod paged_attention;
pub mod vector;
