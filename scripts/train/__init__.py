"""Helpers for scripts/train_default_model.py: corpus extraction and the model card."""
