"""One pydantic base and one definition of label keys and values for every document nodegate
reads (rules, deployment settings, stack config), and one meaning per class name."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest
from pydantic import BaseModel, ValidationError

from nodegate.core.rules import model as rules_model
from nodegate.core.text.frozen import Frozen
from nodegate.infra import stack_config
from nodegate.manifests import settings as deploy_settings
from nodegate.manifests.settings import DeploySettings, ImageSettings
from nodegate.reconciler import settings as reconciler_settings


def _models(module: ModuleType) -> dict[str, type[BaseModel]]:
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and issubclass(cls, BaseModel) and cls.__module__ == module.__name__
    }


@pytest.mark.parametrize(
    "module", [rules_model, deploy_settings, stack_config], ids=lambda m: m.__name__
)
def test_every_document_model_has_the_one_camel_case_frozen_base(module: ModuleType) -> None:
    models = _models(module)
    assert models
    assert [name for name, cls in models.items() if not issubclass(cls, Frozen)] == []


def test_a_deploy_label_key_is_refused_as_a_rules_label_key_is() -> None:
    with pytest.raises(ValidationError) as caught:
        DeploySettings(
            image=ImageSettings(repository="registry.example.com/nodegate"),
            node_selector={"bad key": "x"},
        )
    assert "'bad key' is not a valid Kubernetes key: " in str(caught.value)


def test_no_settings_class_name_means_two_things() -> None:
    deploy = set(_models(deploy_settings))
    running = set(_models(reconciler_settings))
    assert deploy & running == set()
