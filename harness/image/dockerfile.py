"""What a Dockerfile builds FROM: the external base images, as the engine will name them.

`dockerfile-parse` does the parsing (line continuations, comments, `ARG` substitution,
`--platform` flags); this module only tells external images from earlier build stages.
"""

from __future__ import annotations

import io

from dockerfile_parse import DockerfileParser
from dockerfile_parse.parser import image_from

from nodegate.image.errors import ImageError

SCRATCH = "scratch"
DEFAULT_REGISTRY = "docker.io"


def external_bases(dockerfile_text: str, *, source: str = "Dockerfile") -> list[str]:
    """The images the Dockerfile's FROM lines pull, in order, without stage names or scratch."""
    parser = DockerfileParser(fileobj=io.BytesIO(dockerfile_text.encode()))
    # parent_images has one entry (ARGs substituted) per FROM that names an image, in order.
    froms = [image_from(i["value"]) for i in parser.structure if i["instruction"] == "FROM"]
    stage_names = [stage for image, stage in froms if image is not None]
    images: list[str] = list(parser.parent_images)
    if not images:
        raise ImageError(f"{source}: no FROM line names an image: add e.g. FROM python:3.11-slim")
    seen_stages: set[str] = set()
    bases: list[str] = []
    for image, stage in zip(images, stage_names, strict=True):
        if image not in seen_stages and image != SCRATCH and image not in bases:
            bases.append(image)
        if stage:
            seen_stages.add(stage)
    return bases


def qualified(image: str) -> str:
    """The fully qualified name docker gives a short one (`python:3.11-slim` ->
    `docker.io/library/python:3.11-slim`); podman resolves FROM to it without a registry."""
    name, _, digest = image.partition("@")
    first, slash, _ = name.partition("/")
    if not slash:
        name = f"{DEFAULT_REGISTRY}/library/{name}"
    elif not ("." in first or ":" in first or first == "localhost"):
        name = f"{DEFAULT_REGISTRY}/{name}"
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return f"{name}@{digest}" if digest else name
