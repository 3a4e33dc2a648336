"""The Jinja2 environment for the templates shipped in `nodegate.templates`.

Templates are data, found through the package's import spec (Jinja2's PackageLoader) so they
load the same from a wheel, an editable install or a zip. StrictUndefined turns a misspelt
variable into an error instead of an empty string inside a node's boot script.
"""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined


def shell_quote(text: str) -> str:
    """One single-quoted shell word, always quoted so the script reads the same for every pool."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


@cache
def environment() -> Environment:
    """One shared, configured environment (templates are parsed once per process)."""
    env = Environment(
        loader=PackageLoader("nodegate.templates", "."),
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
