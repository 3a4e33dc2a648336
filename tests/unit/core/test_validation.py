"""Each refusal of the rules file, shown on a realistic bad file with the exact message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodegate.core.rules.loader import load_rules, parse_rules, rules_from_data
from nodegate.core.text.errors import Problem, RulesError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"


def problems_of(body: str) -> list[str]:
    with pytest.raises(RulesError) as caught:
        parse_rules(HEADER + textwrap.dedent(body), "rules.yaml")
    return [str(p) for p in caught.value.problems]


def test_shipped_example_is_valid() -> None:
    rules = load_rules(EXAMPLES / "rules.yaml")
    assert [p.name for p in rules.node_pools] == ["ci", "gpu", "batch"]


def test_yaml_syntax_error_names_line_and_column() -> None:
    assert problems_of("labelTaints:\n  - name: [unclosed\n") == [
        "rules.yaml:5:1: (document): YAML syntax error: while parsing a flow sequence started "
        "at line 4: expected ',' or ']', but got '<stream end>'; close each '[' with ']' and "
        "each '{' with '}', or quote the value"
    ]


def test_duplicate_key_is_refused_at_the_repetition_with_its_path() -> None:
    assert problems_of(
        """\
        labelTaints:
          - name: ci
            name: gpu
            match: {labels: {dedicated: ci}}
            taint: {key: dedicated, value: ci, effect: NoSchedule}
            nodeMayLift: true
        """
    ) == [
        "rules.yaml:5:5: labelTaints[0].name: duplicate key 'name' (first at line 4); a key "
        "may appear once per mapping: merge the two entries"
    ]


def test_duplicate_key_is_listed_with_the_other_problems_not_instead_of_them() -> None:
    assert problems_of(
        """\
        labelTaints:
          - name: ci
            name: gpu
            match: {labels: {dedicated: ci}}
            taint: {key: dedicated, value: ci, effect: NoSchedul}
            nodeMayLift: true
        """
    ) == [
        "rules.yaml:5:5: labelTaints[0].name: duplicate key 'name' (first at line 4); a key "
        "may appear once per mapping: merge the two entries",
        "rules.yaml:7:40: labelTaints[0].taint.effect: 'NoSchedul' is not a taint effect: use "
        "one of NoSchedule, PreferNoSchedule, NoExecute; did you mean 'NoSchedule'?",
    ]


def test_a_rule_name_that_is_not_a_dns_label_is_told_the_form_and_a_name_that_fits() -> None:
    assert problems_of(
        """\
        labelTaints:
          - name: CI_rule
            match: {labels: {dedicated: ci}}
            taint: {key: dedicated, value: ci, effect: NoSchedule}
            nodeMayLift: true
        """
    ) == [
        "rules.yaml:4:5: labelTaints[0].name: 'CI_rule' is not a DNS label (lower-case "
        "letters, digits and '-', starting and ending with a letter or digit): write e.g. "
        "'ci-rule'"
    ]


def test_autoscaler_given_as_its_type_alone_is_the_mapping_of_that_type() -> None:
    pools = """\
        nodePools:
          - name: nap
            provider: aks
            size: 0
            autoscaler: {autoscaler}
        """

    short = parse_rules(HEADER + textwrap.dedent(pools).format(autoscaler="karpenter"), "r")
    full = parse_rules(HEADER + textwrap.dedent(pools).format(autoscaler="{type: karpenter}"), "r")

    assert short == full
    assert short.node_pools[0].autoscaler_type == "karpenter"


def test_an_autoscaler_word_that_is_no_type_is_told_the_types_and_the_closest() -> None:
    assert problems_of(
        """\
        nodePools:
          - name: nap
            provider: aks
            size: 0
            autoscaler: karpentr
        """
    ) == [
        "rules.yaml:7:5: nodePools[0].autoscaler: 'karpentr' is not an autoscaler: write its "
        "type (none, cluster-autoscaler, karpenter; e.g. `autoscaler: karpenter`, short for "
        "{type: karpenter}) or a mapping such as {type: cluster-autoscaler, managed: false, "
        "version: '1.31'}; did you mean 'karpenter'?"
    ]


def test_unknown_field_suggests_the_closest_known_one() -> None:
    assert problems_of(
        """\
        labelTaints:
          - name: ci
            match: {labels: {dedicated: ci}}
            taint: {key: dedicated, value: ci, efect: NoSchedule}
            nodeMayLift: true
        """
    ) == [
        "rules.yaml:6:5: labelTaints[0].taint.effect: required field 'effect' is missing",
        "rules.yaml:6:40: labelTaints[0].taint.efect: unknown field 'efect'; did you mean "
        "'effect'? (allowed here: key, value, effect)",
    ]


def test_unquoted_boolean_label_value_says_to_quote_it() -> None:
    assert problems_of(
        """\
        labelTaints:
          - name: spot
            match: {labels: {spot: true}}
            taint: {key: spot, value: "true", effect: PreferNoSchedule}
            nodeMayLift: true
        """
    ) == [
        "rules.yaml:5:22: labelTaints[0].match.labels.spot: expected a string, got True; YAML "
        'reads unquoted true/false/numbers as other types, so quote it: "true"'
    ]


def test_unquoted_number_is_to_be_quoted_as_written_not_as_read() -> None:
    # Quoting what YAML read (12, 1000.0, 15) would give another label value than the author's.
    assert problems_of(
        """\
        labelTaints:
          - name: rack
            match: {labels: {example.com/rack: 012, example.com/row: 1e3}}
            taint: {key: example.com/rack, value: 0o17, effect: NoSchedule}
            nodeMayLift: true
        """
    ) == [
        'rules.yaml:5:22: labelTaints[0].match.labels["example.com/rack"]: expected a string, '
        "got 12; YAML reads unquoted true/false/numbers as other types, so quote it: "
        '"012"',
        'rules.yaml:5:45: labelTaints[0].match.labels["example.com/row"]: expected a string, '
        "got 1000.0; YAML reads unquoted true/false/numbers as other types, so quote it: "
        '"1e3"',
        "rules.yaml:6:36: labelTaints[0].taint.value: expected a string, got 15; YAML reads "
        'unquoted true/false/numbers as other types, so quote it: "0o17"',
    ]


def test_unquoted_number_or_null_key_is_refused_not_turned_into_another_key() -> None:
    # As strings these keys were '1000.0', 'None' and '1.1': other labels than the author's,
    # and other again than kubectl's or helm's YAML makes of them ('1000', 'null', '1.1').
    assert problems_of(
        """\
        labelTaints:
          - name: rack
            match: {labels: {1e3: a, ~: b, 1.10: c}}
            taint: {key: example.com/rack, value: x, effect: NoSchedule}
            nodeMayLift: true
        """
    ) == [
        'rules.yaml:5:22: labelTaints[0].match.labels["1000.0"]: expected a string, got 1000.0; '
        'YAML reads unquoted true/false/numbers as other types, so quote it: "1e3"',
        "rules.yaml:5:30: labelTaints[0].match.labels.None: expected a string, got null (~); "
        'YAML reads an unquoted ~, null or nothing as null: write "" for an empty string, or '
        "quote the value",
        'rules.yaml:5:36: labelTaints[0].match.labels["1.1"]: expected a string, got 1.1; '
        'YAML reads unquoted true/false/numbers as other types, so quote it: "1.10"',
    ]


def test_number_in_data_from_another_reader_is_to_be_quoted_as_written() -> None:
    # Pulumi's engine or Ansible read the YAML: how it was written is not known (Ansible reads
    # `yes` as True, Pulumi's engine 1.10 as 1.1), so the message names no text to quote.
    with pytest.raises(RulesError) as caught:
        rules_from_data(
            {
                "apiVersion": "nodegate.dev/v1",
                "kind": "NodeRules",
                "labelTaints": [
                    {
                        "name": "spot",
                        "match": {"labels": {"example.com/spot": True}},
                        "taint": {"key": "example.com/spot", "value": 1.1, "effect": "NoSchedule"},
                        "nodeMayLift": True,
                    }
                ],
            },
            "Pulumi.dev.yaml (nodegate:rulesInline)",
        )
    assert [p.message for p in caught.value.problems] == [
        f"expected a string, got {given}; YAML reads unquoted true/false/numbers (and, in "
        "YAML 1.1 as Ansible reads it, yes/no/on/off) as other types, so quote the value as "
        "you wrote it"
        for given in ("True", "1.1")
    ]


def test_a_key_named_like_pydantics_key_marker_is_reported_not_a_crash() -> None:
    # Found by the fuzz tier: '[key]' is also what pydantic appends to a failing key's place.
    assert problems_of('"[key]": 1\n') == [
        "rules.yaml:3:1: [\"[key]\"]: unknown field '[key]' (allowed here: apiVersion, kind, "
        "labelTaints, conditionTaints, persistentLabels, startupGates, nodeAgents, nodePools, "
        "evictionBudget)"
    ]


def test_wrong_type_is_refused() -> None:
    assert problems_of(
        """\
        nodePools:
          - {name: ci, provider: oke, size: three}
        """
    ) == [
        "rules.yaml:4:31: nodePools[0].size: Input should be a valid integer, unable to parse "
        "string as an integer (got 'three')"
    ]


@pytest.mark.parametrize(
    ("effect", "suggestion"),
    [
        ("NoSchedul", "did you mean 'NoSchedule'?"),
        ("noexecute", "did you mean 'NoExecute'?"),
        ("PreferNoScheduling", "did you mean 'PreferNoSchedule'?"),
    ],
    ids=["typo", "wrong-case", "suffix"],
)
def test_unknown_taint_effect_suggests_the_closest(effect: str, suggestion: str) -> None:
    [problem] = problems_of(
        f"""\
        labelTaints:
          - name: ci
            match: {{labels: {{dedicated: ci}}}}
            taint: {{key: dedicated, value: ci, effect: {effect}}}
            nodeMayLift: true
        """
    )
    assert problem == (
        f"rules.yaml:6:40: labelTaints[0].taint.effect: '{effect}' is not a taint effect: use "
        f"one of NoSchedule, PreferNoSchedule, NoExecute; {suggestion}"
    )


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (
            "Example.com/gpu",
            "prefix 'Example.com' must be a DNS subdomain: lower-case letters, digits, '-' and "
            "'.', starting and ending with a letter or digit (e.g. 'example.com')",
        ),
        ("example.com/" + "a" * 64, f"name part '{'a' * 64}' is longer than 63 characters"),
        (
            "example.com/-gpu",
            "name part '-gpu' may contain only letters, digits, '-', '_' and '.', and must "
            "start and end with a letter or digit",
        ),
        ("/gpu", "prefix before '/' must not be empty"),
        (
            "example.com/gpu/a100",
            "a key has at most one '/', between a DNS prefix and the name (found 2): e.g. "
            "'example.com/gpu-a100'",
        ),
    ],
    ids=["upper-case-prefix", "name-too-long", "leading-dash", "empty-prefix", "two-slashes"],
)
def test_taint_key_kubernetes_would_reject_is_refused(key: str, reason: str) -> None:
    [problem] = problems_of(
        f"""\
        labelTaints:
          - name: gpu
            match: {{labels: {{gpu: "yes"}}}}
            taint: {{key: "{key}", effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    assert problem == (
        f"rules.yaml:6:13: labelTaints[0].taint.key: '{key}' is not a valid Kubernetes key: "
        f"{reason}"
    )


def test_label_value_kubernetes_would_reject_is_refused() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - name: gpu
            match: {labels: {gpu: "a100 80gb"}}
            taint: {key: gpu, effect: NoSchedule}
            nodeMayLift: true
        """
    )
    assert problem == (
        "rules.yaml:5:22: labelTaints[0].match.labels.gpu: not a valid Kubernetes label/taint "
        "value: 'a100 80gb' may contain only letters, digits, '-', '_' and '.', and must start "
        "and end with a letter or digit (or be empty)"
    )


def test_label_value_longer_than_63_characters_is_refused() -> None:
    [problem] = problems_of(
        f"""\
        labelTaints:
          - name: gpu
            match: {{labels: {{gpu: ok}}}}
            taint: {{key: gpu, value: {"v" * 64}, effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    assert problem.endswith(f"'{'v' * 64}' is longer than 63 characters")


def test_invalid_condition_regex_is_refused() -> None:
    [problem] = problems_of(
        """\
        conditionTaints:
          - name: nic-broken
            conditions:
              - {type: NetworkInterfaceCard, status: "Kaput|(Ruined"}
            taint: {key: example.com/nic, effect: NoExecute}
        """
    )
    assert problem == (
        "rules.yaml:6:38: conditionTaints[0].conditions[0].status: 'Kaput|(Ruined' is not a "
        "valid regular expression: missing ), unterminated subpattern at position 6"
    )


def test_two_rules_wanting_one_taint_with_different_values_are_refused() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - name: ci
            match: {labels: {pool: ci}}
            taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
            nodeMayLift: true
        conditionTaints:
          - name: broken
            conditions: [{type: Broken, status: "True"}]
            taint: {key: example.com/dedicated, value: broken, effect: NoSchedule}
        """
    )
    assert problem == (
        "rules.yaml:11:41: conditionTaints[0].taint.value: taint example.com/dedicated:NoSchedule "
        "wants value 'broken' but labelTaints[0].taint wants 'ci'; a node can carry one "
        "example.com/dedicated:NoSchedule taint, so give both rules the same value or "
        "different keys"
    )


def test_same_taint_with_same_value_in_two_rules_is_allowed() -> None:
    rules = parse_rules(
        HEADER
        + textwrap.dedent(
            """\
            labelTaints:
              - name: ci
                match: {labels: {pool: ci}}
                taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
                nodeMayLift: true
              - name: ci-too
                match: {labels: {team: ci}}
                taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
                nodeMayLift: true
            """
        )
    )
    assert rules.owned_taints() == {("example.com/dedicated", "NoSchedule")}


@pytest.mark.parametrize(
    ("key", "owner"),
    [
        ("node.kubernetes.io/unreachable", "the node lifecycle controller and kubelet"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "the cloud controller manager"),
        ("ToBeDeletedByClusterAutoscaler", "the cluster autoscaler"),
        ("karpenter.sh/disrupted", "Karpenter"),
        ("node-role.kubernetes.io/control-plane", "kubeadm / the platform (control-plane nodes)"),
    ],
    ids=["lifecycle", "cloud-provider", "autoscaler", "karpenter", "node-role"],
)
def test_taint_key_owned_by_kubernetes_or_platform_is_refused(key: str, owner: str) -> None:
    [problem] = problems_of(
        f"""\
        labelTaints:
          - name: mine
            match: {{labels: {{pool: ci}}}}
            taint: {{key: {key}, effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    assert problem == (
        f"rules.yaml:6:5: labelTaints[0].taint: taint key '{key}' belongs to {owner}; nodegate "
        "must not add or remove it. Use a key in your own domain, e.g. 'example.com/dedicated'"
    )


@pytest.mark.parametrize(
    "key",
    ["node-role.kubernetes.io/worker", "node-restriction.kubernetes.io/secure", "k8s.io/team"],
)
def test_pool_label_a_kubelet_may_not_set_points_to_reconciler_labels(key: str) -> None:
    [problem] = problems_of(
        f"""\
        nodePools:
          - name: ci
            provider: oke
            size: 3
            labels: {{"{key}": ""}}
        """
    )
    assert problem == (
        f"rules.yaml:7:14: nodePools[0].labels[\"{key}\"]: a kubelet may not set '{key}' on "
        "its own Node (NodeRestriction; kubelet refuses kubernetes.io/k8s.io labels outside "
        "its allowed set); move it to nodePools[0].reconcilerLabels and the reconciler "
        "applies it right after the node registers"
    )


def test_reconciler_labels_accept_what_a_kubelet_may_not_set() -> None:
    rules = parse_rules(
        HEADER
        + "nodePools:\n  - name: ci\n    provider: oke\n    size: 1\n"
        + '    reconcilerLabels: {"node-role.kubernetes.io/worker": ""}\n'
    )
    assert rules.node_pools[0].reconciler_labels == {"node-role.kubernetes.io/worker": ""}


@pytest.mark.parametrize(
    "key", ["kubernetes.io/hostname", "node.kubernetes.io/instance-type", "example.com/team"]
)
def test_pool_label_a_kubelet_may_set_is_accepted(key: str) -> None:
    rules = parse_rules(
        HEADER + f'nodePools:\n  - {{name: ci, provider: oke, size: 1, labels: {{"{key}": x}}}}\n'
    )
    assert rules.node_pools[0].labels == {key: "x"}


def test_aks_reserved_label_namespace_is_refused_on_aks_pools() -> None:
    [problem] = problems_of(
        """\
        nodePools:
          - {name: batch, provider: aks, size: 1, labels: {kubernetes.azure.com/mode: user}}
        """
    )
    assert problem.endswith(
        "AKS reserves the 'kubernetes.azure.com' label namespace; 'kubernetes.azure.com/mode' "
        "would be refused"
    )


def test_duplicate_rule_names_are_refused() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - {name: ci, match: {labels: {a: b}}, taint: {key: a, effect: NoSchedule},
             nodeMayLift: true}
        startupGates:
          - name: ci
            match: {labels: {a: b}}
            taint: {key: warm, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
        """
    )
    assert problem.startswith(
        "rules.yaml:7:5: startupGates[0].name: rule name 'ci' is already used by labelTaints[0]"
    )


def test_startup_gate_sharing_a_taint_with_another_rule_is_refused() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - {name: ci, match: {labels: {a: b}}, taint: {key: warm, effect: NoSchedule},
             nodeMayLift: true}
        startupGates:
          - name: warmup
            match: {labels: {a: b}}
            taint: {key: warm, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
        """
    )
    assert problem.startswith(
        "rules.yaml:9:5: startupGates[0].taint: taint warm:NoSchedule is also the taint of "
        "labelTaints[0].taint"
    )


def test_every_problem_in_a_file_is_reported_in_one_run() -> None:
    problems = problems_of(
        """\
        labelTaints:
          - name: ci
            match: {labels: {dedicated: ci}}
            taint: {key: dedicated, value: ci, effect: Noschedule}
            nodeMayLift: true
        conditionTaints:
          - name: nic
            conditions: [{type: NIC, status: "("}]
            taint: {key: nic, effect: NoExecute}
            for: soon
        nodePools:
          - {name: ci, provider: gke, size: 1, labels: {node-role.kubernetes.io/ci: ""}}
        """
    )
    assert [p.split(": ")[1] for p in problems] == [
        "labelTaints[0].taint.effect",
        "conditionTaints[0].conditions[0].status",
        "conditionTaints[0].for",
        "nodePools[0].provider",
        'nodePools[0].labels["node-role.kubernetes.io/ci"]',
    ]


def test_wrong_api_version_is_refused() -> None:
    with pytest.raises(RulesError) as caught:
        parse_rules("apiVersion: nodegate.dev/v2\nkind: NodeRules\n", "rules.yaml")
    assert str(caught.value) == (
        "rules.yaml:1:1: apiVersion: 'nodegate.dev/v2' is not allowed: use 'nodegate.dev/v1'"
    )


NODE_READINESS_RULE = """\
apiVersion: readiness.node.x-k8s.io/v1alpha1
kind: NodeReadinessRule
metadata: {name: cni}
spec: {conditions: [{type: NetworkReady, requiredStatus: "True"}]}
"""
TO_MIGRATE = (
    "'NodeReadinessRule' (readiness.node.x-k8s.io/v1alpha1) is node-readiness-controller's "
    "rule, not nodegate's: convert it with `nodegate migrate node-readiness-controller FILE > "
    "rules.yaml` (one FILE may hold several, or the List kubectl prints), then validate "
    "rules.yaml"
)


def refusal(text: str) -> list[str]:
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "rules.yaml")
    return [str(p) for p in caught.value.problems]


def test_a_node_readiness_rule_is_pointed_at_nodegate_migrate_not_refused_field_by_field() -> None:
    assert refusal(NODE_READINESS_RULE) == [f"rules.yaml:2:1: kind: {TO_MIGRATE}"]


def test_a_list_of_node_readiness_rules_is_pointed_at_nodegate_migrate() -> None:
    listed = "apiVersion: v1\nkind: List\nitems:\n" + textwrap.indent(
        NODE_READINESS_RULE, "  "
    ).replace("  apiVersion", "- apiVersion", 1)

    assert refusal(listed) == [
        f"rules.yaml:2:1: kind: {TO_MIGRATE} (the first of this List's 1 items)"
    ]


def test_the_rules_configmap_is_told_which_key_holds_the_rules_to_validate() -> None:
    configmap = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nodegate-rules}\ndata:\n"
        "  rules.yaml: |\n    apiVersion: nodegate.dev/v1\n    kind: NodeRules\n"
    )

    assert refusal(configmap) == [
        "rules.yaml:2:1: kind: 'ConfigMap' (v1) holds the rules, under its key 'rules.yaml': "
        "validate that text, e.g. `kubectl get configmap NAME -o "
        "jsonpath='{.data.rules\\.yaml}' > rules.yaml`"
    ]


def test_another_configmap_is_told_what_a_rules_file_is_and_where_migrate_is() -> None:
    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nidhogg}\ndata: {a: b}\n"

    assert refusal(configmap) == [
        "rules.yaml:2:1: kind: 'ConfigMap' (v1) holds no NodeRules under any key, and a rules "
        "file is apiVersion: nodegate.dev/v1, kind: NodeRules; another tool's settings convert "
        "with `nodegate migrate` (`nodegate migrate --help` lists the tools)"
    ]


def test_empty_file_is_refused() -> None:
    with pytest.raises(RulesError) as caught:
        parse_rules("", "rules.yaml")
    assert "expected a NodeRules mapping" in str(caught.value)


def test_unreadable_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(RulesError) as caught:
        load_rules(tmp_path / "missing.yaml")
    assert str(caught.value) == f"{tmp_path / 'missing.yaml'}: (document): cannot read file: " + (
        "No such file or directory"
    )


def test_a_label_key_another_reader_gave_as_a_number_is_refused_not_a_crash() -> None:
    """Ansible's YAML reads `1:` as an int key; with no positions every problem is at line 0,
    so the int and the word keys beside it are compared when the problems are sorted."""
    with pytest.raises(RulesError) as caught:
        rules_from_data(
            {
                "apiVersion": "nodegate.dev/v1",
                "kind": "NodeRules",
                "nodePools": [
                    {
                        "name": "batch",
                        "provider": "aks",
                        "size": 1,
                        "labels": {1: "b", "kubernetes.azure.com/x": "a"},
                    }
                ],
            },
            "inventory (nodegate_rules)",
        )
    assert len(caught.value.problems) >= 2


def test_warnings_with_a_number_key_beside_a_word_key_sort_as_errors_do() -> None:
    """The loader and `validate` sort warnings too: one order for every Problem."""
    number = Problem(0, 0, "inventory", ("nodePools", 0, "labels", 1), "m", "warning")
    word = Problem(0, 0, "inventory", ("nodePools", 0, "labels", "x"), "m", "warning")
    assert sorted([word, number]) == [number, word]


def test_inline_data_is_validated_with_the_same_messages() -> None:
    with pytest.raises(RulesError) as caught:
        rules_from_data(
            {"apiVersion": "nodegate.dev/v1", "kind": "NodeRules", "labelTaints": [{"name": "x"}]},
            "Pulumi.dev.yaml (nodegate:rulesInline)",
        )
    assert str(caught.value).splitlines()[0] == (
        "Pulumi.dev.yaml (nodegate:rulesInline): labelTaints[0].match: required field 'match' "
        "is missing"
    )


def test_value_less_taint_bound_for_an_aks_pool_is_refused() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - name: gpu
            match: {labels: {example.com/gpu: a100}}
            taint: {key: nvidia.com/gpu, effect: NoSchedule}
            nodeMayLift: true
        nodePools:
          - {name: batch, provider: aks, size: 1, labels: {example.com/gpu: a100}}
        """
    )
    assert problem == (
        "rules.yaml:6:5: labelTaints[0].taint: taint nvidia.com/gpu:NoSchedule has no value but "
        "goes into the nodeTaints of AKS pool 'batch', which AKS takes only as key=value:Effect; "
        'give the taint a value, e.g. value: "present"'
    )


def test_a_gates_min_hold_must_be_shorter_than_its_timeout() -> None:
    assert problems_of(
        """\
        startupGates:
          - name: warmup
            match: {labels: {pool: gpu}}
            taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
            timeout: 2m
            onTimeout: lift
            minHold: 5m
        """
    ) == [
        "rules.yaml:4:5: startupGates[0]: minHold (300s) must be shorter than timeout (120s): "
        "both count from the node's creation (or its reboot); shorten minHold or lengthen timeout"
    ]
