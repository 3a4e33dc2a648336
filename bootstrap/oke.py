"""OKE: a node pool's user_data, which runs OKE's own init script with the registration flags.

A managed OKE node boots by fetching `oke_init_script` from the instance metadata service and
running it; custom user_data replaces that default, so ours does the same and passes kubelet the
pool's taints and labels through `oke-init.sh --kubelet-extra-args`.
"""

from __future__ import annotations

from typing import Final

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.kubelet_flags import format_kubelet_flags, parse_kubelet_flags
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.bootstrap.templating import render_template
from nodegate.bootstrap.user_data import (
    NODEGATE_SCRIPT_FILENAME,
    OCI_METADATA_LIMIT,
    check_size,
    mime_part,
    multipart,
    user_part,
)
from nodegate.core.model import NodePool, NodeRules

__all__ = [
    "OCI_METADATA_LIMIT",
    "OKE_INIT_PATH",
    "OKE_INIT_URL",
    "kubelet_extra_args",
    "parse_kubelet_flags",
    "render_oke_bootstrap_script",
    "render_oke_cloud_init",
]

OKE_INIT_URL: Final = "http://169.254.169.254/opc/v2/instance/metadata/oke_init_script"
"""Where OKE publishes its node init script (base64), per OKE's custom cloud-init docs."""
OKE_INIT_PATH: Final = "/var/run/oke-init.sh"


def _require_oke(pool: NodePool) -> None:
    if pool.provider != "oke":
        raise BootstrapError(
            f"pool '{pool.name}' is an {pool.provider} pool; OKE user_data and kubelet flags "
            "apply to oke pools only"
        )


def kubelet_extra_args(rules: NodeRules, pool: NodePool) -> str:
    """`--register-with-taints=... --node-labels=...` for the pool, proven to read back as meant.

    The flags are parsed back the way kubelet parses them; anything kubelet would refuse, drop
    or read differently is refused here, before a node fails to join.
    """
    _require_oke(pool)
    taints = registration_taints(rules, pool)
    labels = registration_labels(pool)
    args = " ".join(format_kubelet_flags(taints, labels))
    try:
        read_back = parse_kubelet_flags(args)
    except BootstrapError as err:
        raise BootstrapError(f"pool '{pool.name}': {err}") from err
    if read_back != (taints, labels):
        raise BootstrapError(f"pool '{pool.name}': kubelet would read {args!r} differently")
    return args


def render_oke_bootstrap_script(rules: NodeRules, pool: NodePool) -> str:
    """nodegate's boot script alone: fetch oke-init.sh, run it with the flags."""
    return render_template(
        "oke_bootstrap.sh.j2",
        pool=pool.name,
        oke_init_url=OKE_INIT_URL,
        oke_init_path=OKE_INIT_PATH,
        kubelet_extra_args=kubelet_extra_args(rules, pool),
    )


def render_oke_cloud_init(
    rules: NodeRules,
    pool: NodePool,
    user_cloud_init: str | None = None,
    *,
    limit: int = OCI_METADATA_LIMIT,
) -> str:
    """The pool's complete user_data.

    Without `user_cloud_init` (or with a blank one) it is the boot script itself. With one (a
    `#cloud-config` document or a `#!` script) it is a multipart MIME archive: the user's part,
    then nodegate's script, which cloud-init runs last. `limit` is the metadata budget in bytes
    for the base64-encoded user_data; lower it to leave room for other metadata keys.
    """
    script = render_oke_bootstrap_script(rules, pool)
    if user_cloud_init is None or not user_cloud_init.strip():
        user_data = script
    else:
        ours = mime_part("text/x-shellscript", NODEGATE_SCRIPT_FILENAME, script)
        user_data = multipart(pool.name, (user_part(pool.name, user_cloud_init), ours))
    check_size(pool.name, user_data, limit)
    return user_data
