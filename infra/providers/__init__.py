"""The registry of cloud providers the Pulumi program declares node pools on.

Each provider is one module here (its stack-config section, settings, planning, component and
Args) and one line below. The stack config (one `nodegate:<name>` section each) and
`plan_pools` are built from `PROVIDERS` and name no provider themselves; core's profile of the
provider (nodegate.core.rules.providers) is what the rules and the rendering know of it.
`karpenter.py` is not a provider: it declares the NodePool of any provider's pool that
Karpenter runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from nodegate.infra.providers import aks, oke
from nodegate.infra.providers.base import InfraProvider

PROVIDERS: Final[Mapping[str, InfraProvider[Any, Any]]] = MappingProxyType(
    {p.name: p for p in (oke.PROVIDER, aks.PROVIDER)}
)
"""Every provider the program declares pools on, by name, in the stack config's key order."""


def infra_provider(name: str) -> InfraProvider[Any, Any]:
    """The registered provider `name`; a LookupError naming the registered ones otherwise (a
    provider with a profile in core and no module here)."""
    provider = PROVIDERS.get(name)
    if provider is None:
        raise LookupError(
            f"provider '{name}' has no Pulumi module: nodegate.infra.providers registers "
            f"{', '.join(PROVIDERS)}"
        )
    return provider
