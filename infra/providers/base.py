"""What one cloud provider gives the Pulumi program, so that the program names none of them:
an `InfraProvider` in each provider module, listed by the registry (`nodegate.infra.providers`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from nodegate.core.rules.model import Autoscaler, NodePool, NodeRules
from nodegate.core.rules.providers import ProviderProfile
from nodegate.infra.config_base import NAMESPACE, ConfigProblem, config_problems
from nodegate.infra.planned_pool import PlannedPool


class ProviderSection(Protocol):
    """A `nodegate:<provider>` section: cluster-wide settings, `defaults` for every pool, and
    `pools.<name>` overrides (an entry per rules pool of the provider that the stack declares)."""

    @property
    def defaults(self) -> BaseModel: ...

    @property
    def pools(self) -> Mapping[str, BaseModel]: ...


SectionT = TypeVar("SectionT", bound=ProviderSection)
ArgsT = TypeVar("ArgsT", bound=PlannedPool)
SettingsT = TypeVar("SettingsT", bound=BaseModel)


def rules_pool(rules: NodeRules, name: str, provider: str | None = None) -> NodePool:
    """The rules' pool a component is declared for (of `provider`, if given), or the error a
    component raises: Args naming another pool could not produce a correct node pool."""
    pool = rules.pool(name)
    if pool is None:
        names = ", ".join(p.name for p in rules.node_pools) or "none"
        raise ValueError(f"pool '{name}' is not in the rules (pools: {names})")
    if provider is not None and pool.provider != provider:
        raise ValueError(f"pool '{pool.name}' has provider {pool.provider}, not {provider}")
    return pool


def pool_key(provider: str, pool: str) -> str:
    """The stack-config key of a pool's entry, which problems with its settings are reported at."""
    return f"{NAMESPACE}:{provider}.pools.{pool}"


def pool_settings(
    model: type[SettingsT], section: ProviderSection, provider: str, pool: str
) -> SettingsT | list[ConfigProblem]:
    """The pool's settings: `defaults` overridden field by field by the pool's own entry (an
    explicit null clears), validated by `model`; or what is wrong with them, at the pool's keys."""
    merged = {
        **section.defaults.model_dump(by_alias=True, exclude_unset=True),
        **section.pools[pool].model_dump(by_alias=True, exclude_unset=True),
    }
    try:
        return model.model_validate(merged)
    # Invalid merged settings are reported with the rest, naming the pool's keys.
    except ValidationError as err:
        return config_problems(err, f"{pool_key(provider, pool)}.", model, defaults=provider)


@dataclass(frozen=True)
class SettingsArgs:
    """How a provider's validated pool settings become its component's Args: field by field
    under the same names, so the settings model is the one list of what a pool can set (a field
    the Args lack fails the registry test, not a deployment)."""

    settings: type[BaseModel]
    """The merged per-pool settings model."""
    args: type[Any]
    """The component's Args dataclass."""
    nested: Mapping[str, type[Any]] = field(default_factory=dict)
    """By settings field: the Args dataclass a nested settings group (or each item of a list
    of them) becomes."""
    renamed: Mapping[str, str] = field(default_factory=dict)
    """Settings fields whose Args field has another name."""

    def inputs(self, settings: BaseModel, **derived: Any) -> dict[str, Any]:
        """The Args keywords the settings give. `derived` replaces the values of the settings
        fields it names (a path read into the file's text, a default from the rules). A field
        left unset (None) is left out, so the Args' own default applies, as does an empty list
        (Pulumi then receives no property, not an empty one)."""
        unknown = sorted(set(derived) - set(type(settings).model_fields))
        if unknown:
            raise TypeError(f"{', '.join(unknown)}: not fields of {type(settings).__name__}")
        values = self._values(settings, derived)
        return {self.renamed.get(name, name): value for name, value in values.items()}

    def _values(self, group: BaseModel, derived: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The group's fields as keywords (those in `derived` replaced), None left out."""
        values = {name: self._input(name, value) for name, value in group}
        values.update(derived or {})
        return {name: value for name, value in values.items() if value is not None}

    def _input(self, name: str, value: object) -> Any:
        if isinstance(value, BaseModel):
            return self.nested[name](**self._values(value))
        if isinstance(value, tuple):
            return [self._input(name, item) for item in value] or None
        return value


@dataclass(frozen=True)
class StackAutoscaler:
    """An autoscaler the stack config puts in front of a pool whose rules name none, which the
    pool's gates are then checked against."""

    autoscaler: Autoscaler
    key: str
    """The stack-config key that makes the pool autoscaled (where a failing check is reported)."""
    made_by: str
    """What that key does, in words that start the problem's message."""


@dataclass(frozen=True)
class PlansCheck:
    """What a provider finds across all of its planned pools at once."""

    problems: tuple[ConfigProblem, ...] = ()
    autoscalers: Mapping[str, StackAutoscaler] = field(default_factory=dict)
    """By rules pool name: the autoscalers the stack config makes."""


@dataclass(frozen=True)
class InfraProvider(Generic[SectionT, ArgsT]):
    """One cloud provider as the Pulumi program sees it."""

    profile: ProviderProfile
    """What core knows about the provider; its name is the section's key and the rules'."""
    section: type[SectionT]
    """The model of `nodegate:<name>`."""
    settings_args: SettingsArgs
    """How a pool's merged settings become its component's Args."""
    plan: Callable[
        [NodeRules, NodePool, SectionT, Callable[[str], str]], ArgsT | list[ConfigProblem]
    ]
    """(rules, a rules pool of this provider configured in the section, the section, read_text)
    -> the pool's component Args, or what is wrong with its settings."""
    check_plans: Callable[[NodeRules, Sequence[ArgsT]], PlansCheck] = lambda *_: PlansCheck()
    """Checks across the provider's planned pools (names that must be unique in the cloud,
    autoscalers the stack config makes); by default none: its pools are checked one by one."""

    @property
    def name(self) -> str:
        return self.profile.name
