"""`nodegate render`: print what one pool's nodes will be born with, exactly as deployed.

The shell around the pure renderers in nodegate.bootstrap: read the files, pick the renderer
for the format, print. Exit codes: 0 rendered; 1 the rules or the pool's bootstrap are invalid
(every problem on stderr); 2 the command was asked for something that does not exist or fit.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from nodegate.cli.inputs import rules_or_exit

if TYPE_CHECKING:
    from nodegate.bootstrap.oke import ImageFamily
    from nodegate.core.rules.model import NodePool, NodeRules

# The rules, the renderers and their templates are imported when the command runs (PLC0415
# below): a TAB on render's options loads this module to read them, and none of those.


class RenderFormat(StrEnum):
    """What to print for the pool."""

    CLOUD_INIT = "cloud-init"
    KUBELET_ARGS = "kubelet-args"
    OKE_METADATA = "oke-metadata"
    AKS_JSON = "aks-json"
    KARPENTER_NODEPOOL = "karpenter-nodepool"


_USAGE_ERROR = 2


def render(
    rules: Annotated[
        Path, typer.Option("--rules", help="The NodeRules file (YAML).", show_default=False)
    ],
    pool: Annotated[str, typer.Option("--pool", help="Name of a pool in nodePools.")],
    format: Annotated[
        RenderFormat | None,
        typer.Option(
            "--format",
            help="cloud-init, kubelet-args or oke-metadata for an oke pool, aks-json for an aks "
            "pool, karpenter-nodepool for a pool run by Karpenter. Default: the first of these.",
            show_default=False,
        ),
    ] = None,
    user_data: Annotated[
        Path | None,
        typer.Option(
            "--user-data",
            help="Your own cloud-init for an oke pool (#cloud-config or #! script); merged "
            "with nodegate's as multipart MIME.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ] = None,
    image_family: Annotated[
        Literal["oracle-linux", "ubuntu"],
        typer.Option(
            "--image-family",
            help="OKE image family of the pool's nodes: oracle-linux runs OKE's oke-init.sh, "
            "ubuntu runs `oke bootstrap`.",
        ),
    ] = "oracle-linux",
    aks_initialization_taints: Annotated[
        bool,
        typer.Option(
            "--aks-initialization-taints/--no-aks-initialization-taints",
            help="The AKS API version in use has nodeInitializationTaints (preview); "
            "otherwise startup gates go to the Node webhook.",
        ),
    ] = False,
) -> None:
    """Print what a pool's nodes will be born with (user_data, kubelet flags or AKS lists)."""
    from nodegate.bootstrap.errors import BootstrapError  # noqa: PLC0415

    loaded = rules_or_exit(rules)
    chosen = _pool(loaded, pool)
    allowed = _formats(chosen)
    fmt = format or allowed[0]
    if fmt not in allowed:
        run_by = " run by Karpenter" if chosen.autoscaler_type == "karpenter" else ""
        typer.echo(
            f"--format {fmt} does not apply to pool '{chosen.name}' (provider {chosen.provider}"
            f"{run_by}); use {' or '.join(f'--format {a}' for a in allowed)}",
            err=True,
        )
        raise typer.Exit(_USAGE_ERROR)
    if user_data is not None and fmt != RenderFormat.CLOUD_INIT:
        typer.echo(
            f"--user-data is merged into OKE user_data only; it has no effect on --format {fmt}",
            err=True,
        )
        raise typer.Exit(_USAGE_ERROR)
    try:
        text = _rendered(loaded, chosen, fmt, user_data, aks_initialization_taints, image_family)
        typer.echo(text, nl=False)
    except BootstrapError as err:
        typer.echo(f"{rules}: {err}", err=True)
        raise typer.Exit(1) from err


def _pool(rules: NodeRules, name: str) -> NodePool:
    found = rules.pool(name)
    if found is None:
        known = ", ".join(p.name for p in rules.node_pools) or "(none)"
        typer.echo(f"no pool named '{name}' in nodePools; the pools are: {known}", err=True)
        raise typer.Exit(_USAGE_ERROR)
    return found


def _formats(pool: NodePool) -> tuple[RenderFormat, ...]:
    """What renders the pool: a Karpenter NodePool, or its provider's node pool in the formats
    the provider's profile names."""
    from nodegate.core.rules.providers import provider_profile  # noqa: PLC0415

    if pool.autoscaler_type == "karpenter":
        return (RenderFormat.KARPENTER_NODEPOOL,)
    return tuple(RenderFormat(f) for f in provider_profile(pool.provider).render_formats)


def _rendered(
    rules: NodeRules,
    pool: NodePool,
    fmt: RenderFormat,
    user_data: Path | None,
    aks_initialization_taints: bool,
    image_family: ImageFamily,
) -> str:
    from nodegate.bootstrap.errors import BootstrapError  # noqa: PLC0415
    from nodegate.bootstrap.oke import (  # noqa: PLC0415
        kubelet_extra_args,
        oke_node_metadata,
        render_oke_cloud_init,
    )

    if fmt == RenderFormat.KUBELET_ARGS:
        return kubelet_extra_args(rules, pool) + "\n"
    if fmt == RenderFormat.OKE_METADATA:
        return json.dumps(oke_node_metadata(rules, pool), indent=2) + "\n"
    if fmt == RenderFormat.KARPENTER_NODEPOOL:
        from nodegate.bootstrap.karpenter import (  # noqa: PLC0415
            nodepool_notes,
            render_karpenter_nodepool,
        )
        from nodegate.core.text.yaml_output import dump_all  # noqa: PLC0415
        from nodegate.migrate.conversion import header_lines  # noqa: PLC0415

        notes = [line for note in nodepool_notes(rules, pool) for line in header_lines(note, True)]
        return dump_all([render_karpenter_nodepool(rules, pool)], header="\n".join(notes))
    if fmt == RenderFormat.AKS_JSON:
        from nodegate.bootstrap.aks import render_aks_pool  # noqa: PLC0415

        spec = render_aks_pool(
            rules, pool, initialization_taints_supported=aks_initialization_taints
        )
        return spec.to_json() + "\n"
    try:
        user_text = None if user_data is None else user_data.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = f"--user-data {user_data}: cannot read it as UTF-8 text: {err}"
        raise BootstrapError(why) from err
    return render_oke_cloud_init(rules, pool, user_text, image_family=image_family)
