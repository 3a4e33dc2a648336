"""A cloud provider is registered in two places, core's profile and infra's module, and each
consumer reaches it through them: a provider added in one place only fails here, not in a
deployment."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from nodegate.cli.render_cmd import RenderFormat
from nodegate.core.rules.providers import (
    PROFILES,
    Provider,
    UnknownProviderError,
    provider_profile,
)
from nodegate.core.text.frozen import Frozen
from nodegate.infra import planning, program, stack_config
from nodegate.infra.providers import PROVIDERS, infra_provider
from nodegate.infra.providers.base import InfraProvider
from nodegate.infra.stack_config import CONFIG_KEYS, StackConfig

REGISTERED = [pytest.param(p, id=name) for name, p in PROVIDERS.items()]


def test_every_provider_has_a_profile_and_an_infra_module() -> None:
    assert list(PROFILES) == list(PROVIDERS)
    assert all(PROVIDERS[name].profile is profile for name, profile in PROFILES.items())


def test_the_rules_accept_exactly_the_providers_with_a_profile() -> None:
    assert get_args(Provider) == tuple(PROFILES)


@pytest.mark.parametrize("provider", REGISTERED)
def test_every_provider_has_its_stack_config_section(provider: InfraProvider[Any, Any]) -> None:
    field = StackConfig.model_fields[provider.name]
    assert provider.section in get_args(field.annotation)
    assert provider.name in CONFIG_KEYS


@pytest.mark.parametrize("provider", REGISTERED)
def test_every_pool_setting_reaches_the_component_args(provider: InfraProvider[Any, Any]) -> None:
    mapping = provider.settings_args
    args = {f.name for f in dataclasses.fields(mapping.args)}
    settings = mapping.settings.model_fields
    assert [n for n in settings if mapping.renamed.get(n, n) not in args] == []
    groups = [n for n, f in settings.items() if _model_in(f.annotation) is not None]
    assert sorted(mapping.nested) == sorted(groups)
    for name, group_args in mapping.nested.items():
        group = _model_in(settings[name].annotation)
        assert group is not None
        group_fields = {f.name for f in dataclasses.fields(group_args)}
        assert set(group.model_fields) <= group_fields, name


@pytest.mark.parametrize("provider", REGISTERED)
def test_every_provider_model_has_the_frozen_base(provider: InfraProvider[Any, Any]) -> None:
    module = sys.modules[provider.section.__module__]
    models = [
        cls
        for cls in vars(module).values()
        if inspect.isclass(cls) and issubclass(cls, BaseModel) and cls.__module__ == module.__name__
    ]
    assert provider.section in models
    assert [m.__name__ for m in models if not issubclass(m, Frozen)] == []


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_provider_renders_in_formats_the_cli_knows(name: str) -> None:
    formats = PROFILES[name].render_formats
    assert formats
    assert [f for f in formats if f not in set(RenderFormat)] == []


def test_an_unknown_provider_is_a_clear_error_in_core_and_in_infra() -> None:
    known = ", ".join(PROFILES)
    with pytest.raises(
        UnknownProviderError, match=f"unknown provider 'okee': nodegate knows {known}"
    ):
        provider_profile("okee")
    with pytest.raises(LookupError, match="provider 'okee' has no Pulumi module"):
        infra_provider("okee")


def test_settings_args_refuse_a_derived_value_for_no_setting() -> None:
    mapping = PROVIDERS["aks"].settings_args
    settings = mapping.settings.model_validate({"vmSize": "Standard_D4s_v5"})
    with pytest.raises(TypeError, match="vm_sizes: not fields of AksPoolSettings"):
        mapping.inputs(settings, vm_sizes="x")


@pytest.mark.parametrize("module", [planning, program, stack_config], ids=lambda m: m.__name__)
def test_the_program_names_no_provider(module: Any) -> None:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ]
    named = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in PROVIDERS
    ]
    assert [m for m in imported if m.rpartition(".")[2] in PROVIDERS] == []
    assert named == []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _model_in(arg)) is not None), None)
