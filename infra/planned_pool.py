"""What the program does with every pool it plans, whatever its provider: check, then declare.

Each component's Args (`OkeNodePoolArgs`, `AksNodePoolArgs`, `KarpenterNodePoolArgs`) is a
`PlannedPool`: `check()` runs exactly the checks and rendering its component's constructor
runs (the constructor calls it), so the program's pre-flight refuses what the component would refuse
and nothing else; `declare(deploys_webhook)` declares the component (AKS pools' gates depend on
whether the stack deploys nodegate's Node admission webhook) and returns the outputs the stack
exports for the pool. The program has one loop for each, and a new provider adds a component
module and its planning, never a loop.
"""

from __future__ import annotations

from typing import Any, Protocol


class PlannedPool(Protocol):
    """One rules pool as this stack declares it."""

    @property
    def pool_name(self) -> str:
        """The rules pool it realises (the component's name, the key of its exported outputs)."""
        ...

    def check(self) -> object:
        """Everything its component checks and renders before declaring anything (raises
        BootstrapError for what cannot be rendered), run now, before any pool is declared; the
        component declares from what it returns."""
        ...

    def declare(self, deploys_webhook: bool) -> dict[str, Any]: ...
