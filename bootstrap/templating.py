"""The Jinja2 environment for the templates shipped in `nodegate.templates`.

Templates are data, read through importlib.resources so they load the same from a wheel, an
editable install or a zip. StrictUndefined turns a misspelt variable into an error instead of
an empty string inside a node's boot script.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from jinja2 import Environment, FunctionLoader, StrictUndefined

TEMPLATES_PACKAGE = "nodegate.templates"


def shell_quote(text: str) -> str:
    """One single-quoted shell word, always quoted so the script reads the same for every pool."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _load(name: str) -> str:
    return files(TEMPLATES_PACKAGE).joinpath(name).read_text(encoding="utf-8")


@cache
def environment() -> Environment:
    """One shared, configured environment (templates are parsed once per process)."""
    env = Environment(
        loader=FunctionLoader(_load),
        undefined=StrictUndefined,
        autoescape=False,  # shell and MIME, not HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shell_quote"] = shell_quote
    return env


def render_template(name: str, **context: object) -> str:
    return environment().get_template(name).render(**context)
