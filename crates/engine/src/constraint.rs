//! A choice's output constraint (`response_format` `json_object` or `json_schema`, or tool
//! calls): the tokens it may sample next and its state after each sampled token. A mask
//! depends only on the choice's own state, so batching never changes what a choice samples.

use std::sync::Arc;

use sluice_text::constraint::{
    JsonRecognizer, JsonTokenMasks, Recognizer, SchemaRecognizer, TokenMasks, TokenSet,
    ToolCallRecognizer,
};

/// The masks a request's choices share: one per model for `json_object`, one per request for a
/// schema (over the model's trie).
#[derive(Debug, Clone)]
pub enum ConstraintMasks {
    /// Any JSON object.
    JsonObject(Arc<JsonTokenMasks>),
    /// Documents that conform to a schema.
    JsonSchema(Arc<TokenMasks<SchemaRecognizer>>),
    /// Tool calls (one per request: the rules hold its tools). Outside a call in auto mode,
    /// the masks hold every token, those with no bytes (end-of-sequence) included.
    ToolCalls(Arc<TokenMasks<ToolCallRecognizer>>),
}

impl ConstraintMasks {
    /// A constraint at the start of a choice's output.
    pub fn start(&self) -> OutputConstraint {
        match self {
            ConstraintMasks::JsonObject(masks) => OutputConstraint::JsonObject(Constrained::new(
                Arc::clone(masks),
                JsonRecognizer::new(),
            )),
            ConstraintMasks::JsonSchema(masks) => {
                let state = SchemaRecognizer::new(masks.rules());
                OutputConstraint::JsonSchema(Constrained::new(Arc::clone(masks), state))
            }
            ConstraintMasks::ToolCalls(masks) => {
                let state = ToolCallRecognizer::new(masks.rules());
                OutputConstraint::ToolCalls(Constrained::new(Arc::clone(masks), state))
            }
        }
    }
}

/// One choice's constraint.
#[derive(Debug, Clone)]
pub enum OutputConstraint {
    /// `json_object`.
    JsonObject(Constrained<JsonRecognizer>),
    /// `json_schema`.
    JsonSchema(Constrained<SchemaRecognizer>),
    /// Tool calls.
    ToolCalls(Constrained<ToolCallRecognizer>),
}

/// A sampled token the constraint refuses (only possible if the mask was not applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub u32);

impl OutputConstraint {
    /// The tokens that keep the output a valid prefix.
    pub fn allowed(&mut self) -> &TokenSet {
        match self {
            OutputConstraint::JsonObject(c) => c.allowed(),
            OutputConstraint::JsonSchema(c) => c.allowed(),
            OutputConstraint::ToolCalls(c) => c.allowed(),
        }
    }

    /// Moves past `token`; `Ok(true)` when the output is complete (the choice then stops).
    pub fn accept(&mut self, token: u32) -> Result<bool, Refused> {
        match self {
            OutputConstraint::JsonObject(c) => c.accept(token),
            OutputConstraint::JsonSchema(c) => c.accept(token),
            OutputConstraint::ToolCalls(c) => c.accept(token),
        }
    }
}

/// A recognizer state with its masks.
#[derive(Debug, Clone)]
pub struct Constrained<R: Recognizer> {
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
}
