//! Building blocks shared by every architecture. Each struct mirrors a module of the Hugging
//! Face checkpoint, so tensor names follow from the prefix it is loaded with.

pub mod attention;
pub mod linear;
pub mod mlp;
pub mod norm;
pub mod rope;
