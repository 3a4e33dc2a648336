"""Jinja2 templates (data only)."""
