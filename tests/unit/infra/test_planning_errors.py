"""`plan_pools` says what is wrong with rules it is given, even rules built in code that never
went through the loader: an error, never a crash."""

from __future__ import annotations

import pytest

from nodegate.core.rules.model import NodeRules
from nodegate.infra.config_base import StackConfigError
from nodegate.infra.planning import plan_pools
from nodegate.infra.stack_config import parse_stack_config


def test_an_autoscaler_finding_on_a_pool_the_stack_did_not_autoscale_is_reported() -> None:
    rules = NodeRules.model_validate(
        {
            "apiVersion": "nodegate.dev/v1",
            "kind": "NodeRules",
            "nodePools": [
                {"name": "k", "provider": "oke", "size": 1, "autoscaler": {"type": "karpenter"}}
            ],
        }
    )
    config = parse_stack_config({"rules": "rules.yaml"}, "dev")
    with pytest.raises(StackConfigError, match=r"nodegate:rules: .*nodeClassRef"):
        plan_pools(rules, config, "dev", lambda _pool: "", None)
