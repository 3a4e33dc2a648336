"""Shipped example rules files; the CLI and the demo use them as the embedded default."""
