"""The stack's `nodegate:*` configuration schema, parsed once at the edge into frozen objects.

A stack names its rules (`nodegate:rules` path, or `nodegate:rulesInline`), says how each rules
pool maps onto its cloud (one section per provider, `nodegate:oke`, `nodegate:aks`: each the
provider's own model, nodegate.infra.providers; cluster-wide settings, `defaults` for every
pool, and `pools.<name>` overrides), and may hand pools to another stack
(`nodegate:skipPools`). Every problem is collected and reported at once, each line naming the
exact key to fix, before the program declares a single resource. Matching this config to the
rules' pools is `planning.py`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError, create_model, field_validator, model_validator

from nodegate.core.text.frozen import Frozen
from nodegate.infra.config_base import (
    NAMESPACE,
    NonEmpty,
    StackConfigError,
    config_problems,
    engine_date_problems,
)
from nodegate.infra.providers import PROVIDERS
from nodegate.infra.providers.base import ProviderSection
from nodegate.manifests.settings import DeploySettings

# --- the reconciler --------------------------------------------------------------------------


class ReconcilerStackConfig(DeploySettings):
    """`nodegate:reconciler`: the deployment settings (docs/infra.md), plus the cluster."""

    kubeconfig: NonEmpty | None = None
    """Kubeconfig of the cluster the reconciler runs in: a file path (relative to the project
    directory) or the file's contents; default: the ambient one (KUBECONFIG, ~/.kube/config)."""
    context: NonEmpty | None = None
    """Kubeconfig context; default: the kubeconfig's current context."""


# --- the whole stack -------------------------------------------------------------------------


class _RulesSource(Frozen):
    """The first keys of `nodegate:`: where the rules come from."""

    rules: NonEmpty | None = None
    """Path of the rules file, relative to the project directory (where Pulumi.yaml is)."""
    rules_inline: Any = None
    """The rules themselves as structured config, instead of `rules`."""

    @field_validator("rules")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        # Structured config under a string key reaches the program as its JSON text.
        if value is not None and value.lstrip().startswith(("{", "[")):
            raise ValueError(
                "this is the path of a rules file; put the rules themselves under "
                "'nodegate:rulesInline'"
            )
        return value

    @model_validator(mode="after")
    def _one_rules_source(self) -> _RulesSource:
        if (self.rules is None) == (self.rules_inline is None):
            raise ValueError(
                "give exactly one of 'nodegate:rules' (path to the rules file, e.g. "
                "examples/rules.yaml) or 'nodegate:rulesInline' (the rules as structured config)"
            )
        return self


if TYPE_CHECKING:
    _ProviderSections = _RulesSource
else:
    # One optional section per registered provider, after the rules keys (the order the keys
    # are listed in, in the docs and in "allowed here" hints); None: the stack has none.
    _ProviderSections = create_model(
        "_ProviderSections",
        __base__=_RulesSource,
        __module__=__name__,
        **{name: (provider.section | None, None) for name, provider in PROVIDERS.items()},
    )


class StackConfig(_ProviderSections):
    """Everything under `nodegate:` in a stack."""

    skip_pools: tuple[str, ...] = ()
    """Rules pools this stack deliberately leaves alone (another stack manages them)."""
    reconciler: ReconcilerStackConfig | None = None
    """The reconciler deployment; None: this stack does not deploy the reconciler."""

    def section(self, provider: str) -> ProviderSection | None:
        """The `nodegate:<provider>` section (None: the stack has none)."""
        section: ProviderSection | None = getattr(self, provider)
        return section


CONFIG_KEYS = tuple(field.alias or name for name, field in StackConfig.model_fields.items())
"""Every top-level key the program reads."""


# --- parsing ---------------------------------------------------------------------------------


def parse_stack_config(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Validate the raw `nodegate:*` values (None for unset keys); StackConfigError if wrong."""
    values = {key: value for key, value in raw.items() if value is not None}
    dates = engine_date_problems(values)
    if dates:
        raise StackConfigError(stack, dates)
    try:
        return StackConfig.model_validate(values)
    # Permanent: the stack file is wrong; report every key at once, in stack-config terms.
    except ValidationError as err:
        raise StackConfigError(stack, config_problems(err, f"{NAMESPACE}:", StackConfig)) from err
