//! sluice's text side: tokenizer, chat templates, incremental UTF-8-safe detokenizer and the
//! stop-string matcher. Knows nothing of tensors.
