"""OKE: a node pool's user_data, which joins the node with the registration flags.

Custom user_data replaces OKE's default, so ours does what the default does for the pool's
image family, passing kubelet the pool's taints and labels:

* Oracle Linux images (the default): fetch `oke_init_script` from the instance metadata service
  (retrying, over IPv4 then IPv6) and run it as `oke-init.sh --kubelet-extra-args '…'`;
* OKE Ubuntu images: `oke bootstrap --kubelet-extra-args '…'` (the `oke` command ships in
  them; they have no `oke_init_script` path).
"""

from __future__ import annotations

from typing import Final, Literal

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.kubelet_flags import proven_kubelet_flags
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.bootstrap.templating import render_template
from nodegate.bootstrap.user_data import (
    NODEGATE_SCRIPT_FILENAME,
    OKE_USER_DATA_BUDGET,
    metadata_payload,
    mime_part,
    multipart,
    user_part,
)
from nodegate.core.rules.model import NodePool, NodeRules
from nodegate.core.rules.providers import OKE

OKE_INIT_URL: Final = "http://169.254.169.254/opc/v2/instance/metadata/oke_init_script"
"""Where OKE publishes its node init script (base64), per OKE's custom cloud-init docs."""
OKE_INIT_URL_IPV6: Final = "http://[fd00:c1::a9fe:a9fe]/opc/v2/instance/metadata/oke_init_script"
"""The same, at the metadata service's IPv6 address (the only one an IPv6-only subnet reaches);
Oracle's own worker cloud-init tries both (oracle-terraform-modules/terraform-oci-oke)."""
OKE_INIT_PATH: Final = "/var/run/oke-init.sh"
FETCH_ATTEMPTS: Final = 10
FETCH_RETRY_DELAY_SECONDS: Final = 3
"""Up to 10 rounds over both addresses, 3 s apart: the metadata service can lag a fresh boot."""

KUBELET_EXTRA_ARGS_KEY: Final = "kubelet-extra-args"
"""Node pool metadata key that cluster-autoscaler's OCI provider reads a pool's registration
taints from when the pool has no node to copy (scale from zero): it takes the value of the first
`--register-with-taints` in it (`cloudprovider/oci/nodepools/registered_taints.go`), and reads
no cloud-init."""

ImageFamily = Literal["oracle-linux", "ubuntu"]
IMAGE_FAMILIES: Final = ("oracle-linux", "ubuntu")
"""OKE worker image families, which join the cluster differently (see the module doc)."""


def kubelet_extra_args(rules: NodeRules, pool: NodePool) -> str:
    """`--register-with-taints=... --node-labels=...` for the pool, proven to read back as meant
    (`proven_kubelet_flags`)."""
    if pool.provider != OKE.name:
        raise BootstrapError(
            f"pool '{pool.name}' is an {pool.provider} pool; OKE user_data and kubelet flags "
            f"apply to {OKE.name} pools only"
        )
    taints = registration_taints(rules, pool)
    labels = registration_labels(pool)
    return " ".join(proven_kubelet_flags(taints, labels, f"pool '{pool.name}'"))


def oke_node_metadata(rules: NodeRules, pool: NodePool) -> dict[str, str]:
    """The node pool metadata nodegate sets besides `user_data`: the kubelet flags the cloud-init
    passes, under KUBELET_EXTRA_ARGS_KEY (the autoscaler's template drops the gates carrying the
    startup prefix; permanent taints stay, and pods that do not tolerate them go elsewhere)."""
    return {KUBELET_EXTRA_ARGS_KEY: kubelet_extra_args(rules, pool)}


def user_data_budget(rules: NodeRules, pool: NodePool) -> int:
    """Bytes the pool's user_data may take (base64) next to its other node metadata (OCI counts
    the keys and the values together)."""
    metadata = oke_node_metadata(rules, pool).items()
    return OKE_USER_DATA_BUDGET - sum(len(k.encode()) + len(v.encode()) for k, v in metadata)


def render_oke_bootstrap_script(
    rules: NodeRules, pool: NodePool, image_family: ImageFamily = "oracle-linux"
) -> str:
    """nodegate's boot script alone: join the node the image family's way, with the flags."""
    if image_family not in IMAGE_FAMILIES:
        raise BootstrapError(
            f"pool '{pool.name}': image family '{image_family}' is not one of "
            f"{', '.join(IMAGE_FAMILIES)}"
        )
    return render_template(
        "oke_bootstrap.sh.j2",
        pool=pool.name,
        image_family=image_family,
        oke_init_urls=(OKE_INIT_URL, OKE_INIT_URL_IPV6),
        oke_init_path=OKE_INIT_PATH,
        attempts=FETCH_ATTEMPTS,
        retry_delay_seconds=FETCH_RETRY_DELAY_SECONDS,
        kubelet_extra_args=kubelet_extra_args(rules, pool),
    )


def render_oke_cloud_init(
    rules: NodeRules,
    pool: NodePool,
    user_cloud_init: str | None = None,
    *,
    image_family: ImageFamily = "oracle-linux",
) -> str:
    """The pool's complete user_data: the boot script, or with a `user_cloud_init` that is not
    blank the archive of both that `nodegate.bootstrap.user_data` assembles. As stored in the
    instance metadata (`metadata_payload`) it must fit OKE_USER_DATA_BUDGET less the pool's
    other metadata (`oke_node_metadata`), which shares OCI's limit."""
    script = render_oke_bootstrap_script(rules, pool, image_family)
    if user_cloud_init is None or not user_cloud_init.strip():
        user_data = script
    else:
        ours = mime_part("text/x-shellscript", NODEGATE_SCRIPT_FILENAME, script)
        user_data = multipart(pool.name, (user_part(pool.name, user_cloud_init), ours))
    metadata_payload(pool.name, user_data, user_data_budget(rules, pool))  # raises if it cannot fit
    return user_data
