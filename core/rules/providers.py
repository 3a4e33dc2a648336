"""What nodegate knows about each cloud provider whose node pools it renders: one record each.

A rules pool names its provider (`nodePools[].provider`). Everything that depends on it (label
namespaces the cloud refuses, a taint field that takes only `key=value:Effect`, the node class a
Karpenter NodePool defaults to there, the label a kubelet there writes about its own pool, how
`nodegate render` shows the pool) is read from the provider's profile here, never from a
comparison of its name, so that a new provider is one record in this file (plus its rendering and
its Pulumi module, docs/infra.md), not an edit in every consumer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from nodegate.core.text.k8s_names import key_in_domain

Provider = Literal["oke", "aks"]
"""The clouds whose node pools nodegate renders and declares: the names of `PROFILES`."""


@dataclass(frozen=True)
class DefaultNodeClass:
    """The node class a Karpenter NodePool of the provider's pools launches from when the rules
    name none (`autoscaler.nodeClassRef`)."""

    group: str
    kind: str
    name: str
    offered_by: str
    """Who provides it, for messages, e.g. 'AKS node auto-provisioning'."""


@dataclass(frozen=True)
class ProviderProfile:
    """The facts about one provider that the rules checks, the rendering and the CLI ask for."""

    name: Provider
    """As the rules spell it (`provider: aks`)."""
    title: str
    """How messages name the cloud's Kubernetes service, e.g. 'AKS'."""
    reserved_label_domains: tuple[str, ...] = ()
    """Label namespaces (subdomains included) the cloud refuses in a pool's node labels."""
    taints_need_values_in: str | None = None
    """The cloud API field a pool's permanent taints go to when it takes only `key=value:Effect`
    (AKS `nodeTaints`); None: the taints reach the node some other way."""
    kubelet_pool_label: str | None = None
    """A label the kubelet writes about the pool it joined: no evidence of membership, since a
    node can write another (the node-trust advice names it)."""
    karpenter_node_class: DefaultNodeClass | None = None
    """The default node class of the provider's pools run by Karpenter; None: the rules must
    name one."""
    render_formats: tuple[str, ...] = ()
    """The `nodegate render --format`s that print what a pool's nodes are born with (when no
    Karpenter runs the pool); the first is the default."""

    def reserved_label_domain(self, key: str) -> str | None:
        """The namespace the cloud reserves that `key` is in, or None if the cloud takes it."""
        return next((d for d in self.reserved_label_domains if key_in_domain(key, d)), None)


OKE: Final = ProviderProfile(
    name="oke",
    title="OKE",
    render_formats=("cloud-init", "kubelet-args", "oke-metadata"),
)

AKS: Final = ProviderProfile(
    name="aks",
    title="AKS",
    reserved_label_domains=("kubernetes.azure.com",),
    taints_need_values_in="nodeTaints",
    kubelet_pool_label="kubernetes.azure.com/agentpool",
    karpenter_node_class=DefaultNodeClass(
        group="karpenter.azure.com",
        kind="AKSNodeClass",
        name="default",
        offered_by="AKS node auto-provisioning",
    ),
    render_formats=("aks-json",),
)

PROFILES: Final[Mapping[str, ProviderProfile]] = MappingProxyType({p.name: p for p in (OKE, AKS)})
"""Every provider's profile, by name, in the order the rules schema lists them."""


class UnknownProviderError(ValueError):
    """A provider name with no profile: a programming error once the rules have validated."""


def provider_profile(name: str) -> ProviderProfile:
    """The profile of provider `name`; UnknownProviderError naming the known ones otherwise."""
    profile = PROFILES.get(name)
    if profile is None:
        raise UnknownProviderError(
            f"unknown provider '{name}': nodegate knows {', '.join(PROFILES)} "
            "(core/rules/providers.py)"
        )
    return profile


def default_node_classes() -> dict[str, DefaultNodeClass]:
    """The providers whose pools run by Karpenter need no `nodeClassRef`, and their default."""
    return {
        name: profile.karpenter_node_class
        for name, profile in PROFILES.items()
        if profile.karpenter_node_class is not None
    }
