//! sluice's OpenAI-compatible HTTP API.
