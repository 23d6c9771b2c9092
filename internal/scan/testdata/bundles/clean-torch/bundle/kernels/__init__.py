"""Helpers for the silu kernel."""
