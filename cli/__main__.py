"""`python -m nodegate.cli`: the same CLI as the `nodegate` script (used by the image and tests)."""

from nodegate.cli.main import app

app()
