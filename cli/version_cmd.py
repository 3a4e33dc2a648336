"""`nodegate version`: this nodegate's version, and the image tag it deploys (the image follows
the package, `nodegate.manifests.version`), so a user about to deploy sees which image must be
pushed.
"""

from __future__ import annotations

import typer

from nodegate.manifests.version import package_version


def version() -> None:
    """Print nodegate's version and the image tag it deploys.

    The tag is the one `nodegate manifests`, the Helm chart and the Pulumi component deploy
    when no --image-tag (image.tag) is given: the image `make image` builds from this tree.
    """
    current = package_version()
    typer.echo(f"nodegate {current}")
    typer.echo(f"image tag {current} (deployed unless --image-tag or image.tag names another)")
