//! A choice's output constraint (`response_format` `json_object` or `json_schema`, a regex, a
//! grammar, or tool calls): the tokens it may sample next and its state after each sampled
//! token. A mask depends only on the choice's own state, so batching never changes what a
//! choice samples.
//!
//! Every kind is a [`Recognizer`] with its [`TokenMasks`]; [`ConstraintMasks::new`] takes any
//! of them, so a new kind of constraint is a recognizer in `sluice_text::constraint` and one
//! line where the engine takes a request in (`engine/intake.rs`), not arms here.

use std::fmt::Debug;
use std::sync::Arc;

use sluice_text::constraint::{Recognizer, TokenMasks, TokenSet};

/// The masks a request's choices share: one per model for `json_object`, one per request for a
/// schema, regex, grammar or tool calls (over the model's trie).
#[derive(Debug, Clone)]
pub struct ConstraintMasks(Arc<dyn StartConstraint>);

impl ConstraintMasks {
    /// The constraint whose states `masks` reads.
    pub fn new<R: Recognizer>(masks: Arc<TokenMasks<R>>) -> Self {
        ConstraintMasks(Arc::new(Shared(masks)))
    }

    /// A constraint at the start of a choice's output.
    pub fn start(&self) -> OutputConstraint {
        self.0.start()
    }
}

/// Masks of some recognizer kind, able to start a choice's constraint.
trait StartConstraint: Debug + Send + Sync {
    fn start(&self) -> OutputConstraint;
}

#[derive(Debug)]
struct Shared<R: Recognizer>(Arc<TokenMasks<R>>);

impl<R: Recognizer> StartConstraint for Shared<R> {
    fn start(&self) -> OutputConstraint {
        let state = R::start(self.0.rules());
        OutputConstraint(Box::new(Constrained::new(Arc::clone(&self.0), state)))
    }
}

/// One choice's constraint. A clone moves on its own (speculative decoding checks draft
/// tokens on a copy).
#[derive(Debug)]
pub struct OutputConstraint(Box<dyn ChoiceConstraint>);

impl Clone for OutputConstraint {
    fn clone(&self) -> Self {
        OutputConstraint(self.0.clone_box())
    }
}

/// A sampled token the constraint refuses (only possible if the mask was not applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub u32);

impl OutputConstraint {
    /// The tokens that keep the output a valid prefix.
    pub fn allowed(&mut self) -> &TokenSet {
        self.0.allowed()
    }

    /// Moves past `token`; `Ok(true)` when the output is complete (the choice then stops).
    pub fn accept(&mut self, token: u32) -> Result<bool, Refused> {
        self.0.accept(token)
    }
}

/// A recognizer state with its masks, whatever the recognizer.
trait ChoiceConstraint: Debug + Send + Sync {
    fn allowed(&mut self) -> &TokenSet;
    fn accept(&mut self, token: u32) -> Result<bool, Refused>;
    fn clone_box(&self) -> Box<dyn ChoiceConstraint>;
}

/// A recognizer state with its masks.
#[derive(Debug, Clone)]
struct Constrained<R: Recognizer> {
    masks: Arc<TokenMasks<R>>,
    state: R,
    /// The mask of `state`, once asked for.
    allowed: Option<Arc<TokenSet>>,
}

impl<R: Recognizer> Constrained<R> {
    fn new(masks: Arc<TokenMasks<R>>, state: R) -> Self {
        Constrained {
            masks,
            state,
            allowed: None,
        }
    }
}

impl<R: Recognizer> ChoiceConstraint for Constrained<R> {
    fn allowed(&mut self) -> &TokenSet {
        let (masks, state) = (&self.masks, &self.state);
        self.allowed.get_or_insert_with(|| masks.allowed(state))
    }

    fn accept(&mut self, token: u32) -> Result<bool, Refused> {
        let next = self
            .masks
            .after_token(self.state, token)
            .ok_or(Refused(token))?;
        self.state = next;
        self.allowed = None;
        Ok(next.is_complete())
    }

    fn clone_box(&self) -> Box<dyn ChoiceConstraint> {
        Box::new(self.clone())
    }
}
