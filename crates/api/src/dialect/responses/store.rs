//! A finished response put into the Responses store (for `previous_response_id` and `GET`).

use std::time::Instant;

use serde_json::Value;

use super::{ResponsesRenderer, Storing};
use crate::responses_store::StoredResponse;
use crate::wire::UsageBody;

impl ResponsesRenderer {
    /// Ends the turn (if `Finish` never came) and keeps the response when asked to; the
    /// final response object.
    pub(super) fn complete(&mut self, usage: &UsageBody) -> Value {
        // Frames of an item still open are dropped: a turn always finishes before the end.
        self.finish_item();
        let mut response = self.response(self.final_status(), Some(usage));
        if let Some(Storing {
            store,
            conversation,
            input_start,
            owner,
        }) = self.store.take()
        {
            let stored = store.put(
                self.meta.id.clone(),
                StoredResponse {
                    input: conversation,
                    input_start,
                    output: self.output_items(),
                    body: response.clone(),
                    created: Instant::now(),
                    owner,
                },
            );
            // The request's size was checked before generating; the output can still make
            // the whole too large. The client has its answer: it is told the response was not
            // kept rather than refused after the work was done.
            if let Err(too_large) = stored {
                tracing::warn!(id = %self.meta.id, "response not stored: {too_large}");
                response["store"] = Value::Bool(false);
            }
        }
        response
    }
}
