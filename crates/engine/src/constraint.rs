//! A choice's output constraint (`response_format: json_object`): the tokens it may sample next
//! and its state after each sampled token.

use std::sync::Arc;

use sluice_text::constraint::{JsonRecognizer, JsonTokenMasks, TokenSet};

/// The JSON-object constraint of one choice.
#[derive(Debug, Clone)]
pub struct JsonConstraint {
    masks: Arc<JsonTokenMasks>,
    state: JsonRecognizer,
    /// The mask of `state`, once asked for.
    allowed: Option<Arc<TokenSet>>,
}

/// A sampled token the constraint refuses (only possible if the mask was not applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub u32);

impl JsonConstraint {
    /// A constraint at the start of the output, with the model's shared token masks.
    pub fn new(masks: Arc<JsonTokenMasks>) -> Self {
        JsonConstraint {
            masks,
            state: JsonRecognizer::new(),
            allowed: None,
        }
    }

    /// The tokens that keep the output a valid prefix of one JSON object.
    pub fn allowed(&mut self) -> &TokenSet {
        let (masks, state) = (&self.masks, &self.state);
        self.allowed.get_or_insert_with(|| masks.allowed(state))
    }

    /// Moves past `token`; `Ok(true)` when the object is complete (the choice then stops).
    pub fn accept(&mut self, token: u32) -> Result<bool, Refused> {
        let next = self
            .masks
            .after_token(self.state, token)
            .ok_or(Refused(token))?;
        self.state = next;
        self.allowed = None;
        Ok(next.is_complete())
    }
}
