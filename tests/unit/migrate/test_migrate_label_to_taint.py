"""`nodegate migrate label-to-taint`: the operator's three constants as one label taint rule."""

from __future__ import annotations

from nodegate.bootstrap.oke import kubelet_extra_args
from nodegate.cli.main import app
from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.core.rules.model import NodePool
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.label_to_taint import convert_label_to_taint
from tests.unit.migrate.support import EXAMPLES, problems_of, runner

SOURCE = "the operator's constants (LABEL_KEY, LABEL_VALUE, TAINT_EFFECT)"


def test_the_documented_constants_convert_to_the_shipped_rules_file() -> None:
    """Its README: LABEL_KEY = "dedicated", LABEL_VALUE = "ci", TAINT_EFFECT = "NoSchedule"."""
    converted = to_yaml(convert_label_to_taint("dedicated", "ci", "NoSchedule"))
    assert converted == (EXAMPLES / "label-to-taint.yaml").read_text()


def test_the_rule_taints_dedicated_ci_nodes_as_the_operator_did() -> None:
    [rule] = load_rules(EXAMPLES / "label-to-taint.yaml").label_taints
    assert rule.match.matches({"dedicated": "ci"}) and not rule.match.matches({"dedicated": "x"})
    assert rule.taint.flag() == "dedicated=ci:NoSchedule"


def test_an_oke_pool_with_the_label_is_born_with_the_flag_its_readme_has_you_type() -> None:
    """The README's oke-init.sh line: --register-with-taints=dedicated=ci:NoSchedule."""
    rules = load_rules(EXAMPLES / "label-to-taint.yaml")
    pool = NodePool(name="ci", provider="oke", size=1, labels={"dedicated": "ci"})
    args = kubelet_extra_args(rules.model_copy(update={"node_pools": (pool,)}), pool)
    assert "--register-with-taints=dedicated=ci:NoSchedule" in args.split()


def test_other_constants_give_the_same_shape_of_rule() -> None:
    text = to_yaml(convert_label_to_taint("example.com/gpu", "a100", "NoExecute"))
    [rule] = parse_rules(text).label_taints
    assert (rule.name, rule.taint.flag()) == ("gpu-a100", "example.com/gpu=a100:NoExecute")
    assert "nodegate adds timeAdded to the NoExecute taint" in text


def test_refused_constants_are_named_by_their_flag() -> None:
    assert problems_of(convert_label_to_taint(effect="NoSchedul")) == [
        f"{SOURCE}: --effect: 'NoSchedul' is not a taint effect: use one of NoSchedule, "
        "PreferNoSchedule, NoExecute; did you mean 'NoSchedule'?"
    ]
    assert problems_of(convert_label_to_taint(label_key="node.kubernetes.io/dedicated")) == [
        f"{SOURCE}: --label-key: taint key 'node.kubernetes.io/dedicated' belongs to the node "
        "lifecycle controller and kubelet; nodegate must not add or remove it. Use a key in your "
        "own domain, e.g. 'example.com/dedicated'"
    ]


def test_a_malformed_key_or_value_is_reported_once_each() -> None:
    result = runner.invoke(
        app, ["migrate", "label-to-taint", "--label-key", "bad key", "--label-value", "-ci"]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{SOURCE}: --label-key: 'bad key': name part 'bad key' may contain only letters, "
        "digits, '-', '_' and '.', and must start and end with a letter or digit",
        f"{SOURCE}: --label-value: '-ci': '-ci' may contain only letters, digits, '-', '_' and "
        "'.', and must start and end with a letter or digit (or be empty)",
    ]


def test_the_command_defaults_to_the_operators_constants() -> None:
    result = runner.invoke(app, ["migrate", "label-to-taint"])
    assert result.exit_code == 0
    assert result.stdout == (EXAMPLES / "label-to-taint.yaml").read_text()
