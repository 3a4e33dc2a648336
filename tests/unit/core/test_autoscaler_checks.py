"""Startup gates checked against each pool's autoscaler: every finding, located, with its fix."""

from __future__ import annotations

import textwrap

import pytest

from nodegate.core.rules.autoscaler_checks import MANAGED_CA, autoscaler_findings
from nodegate.core.rules.loader import check_rules_data
from nodegate.core.text.errors import RulesError
from nodegate.core.text.yaml_input import read_yaml
from tests.unit.core.builders import rules

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
PLAIN = "startup.example.com/initializing"
PREFIXED = "startup-taint.cluster-autoscaler.kubernetes.io/initializing"


def document(
    key: str = PLAIN, autoscaler: str = "{type: cluster-autoscaler}", timeout: str = "10m"
) -> str:
    """One gate on one pool; line 6 holds the gate's taint, line 8 its timeout."""
    return HEADER + textwrap.dedent(
        f"""\
        startupGates:
          - name: warmup
            match: {{labels: {{example.com/accelerator: nvidia}}}}
            taint: {{key: {key}, value: wait, effect: NoSchedule}}
            readyWhen: {{annotation: example.com/ready=true}}
            timeout: {timeout}
        nodePools:
          - name: gpu
            provider: oke
            size: 0
            labels: {{example.com/accelerator: nvidia}}
            autoscaler: {autoscaler}
        """
    )


def check(text: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) as `nodegate validate` prints them."""
    tree, positions = read_yaml(text, "rules.yaml")
    try:
        checked = check_rules_data(tree, "rules.yaml", positions)
    except RulesError as err:
        return [str(p) for p in err.problems], []
    return [], [str(w) for w in checked.warnings]


def test_an_unprefixed_gate_on_a_managed_autoscaler_is_an_error_naming_the_renamed_key() -> None:
    errors, _ = check(document())
    assert errors == [
        "rules.yaml:6:13: startupGates[0].taint.key: gate 'warmup' is not a startup taint to a "
        "managed cluster-autoscaler (OKE add-on, AKS: no --startup-taint flag) in front of pool "
        "'gpu': it would count a gated node as ready capacity the pending pods cannot use and add "
        "another node, and never scale the pool up from zero; rename the key "
        f"'{PREFIXED}'"
    ]


def test_an_old_managed_autoscaler_is_told_the_deprecated_ignore_taint_prefix() -> None:
    errors, _ = check(document(autoscaler='{type: cluster-autoscaler, version: "1.28"}'))
    assert len(errors) == 1
    assert (
        "rename the key 'ignore-taint.cluster-autoscaler.kubernetes.io/initializing'" in errors[0]
    )
    assert "before 1.29" in errors[0]


def test_a_prefixed_gate_on_a_managed_autoscaler_is_valid() -> None:
    assert check(document(PREFIXED)) == ([], [])


def test_the_startup_prefix_on_an_autoscaler_older_than_1_29_is_an_error() -> None:
    errors, _ = check(document(PREFIXED, '{type: cluster-autoscaler, version: "1.27.3"}'))
    assert len(errors) == 1
    assert "reads this prefix as a startup taint only from 1.29 on" in errors[0]
    assert "'ignore-taint.cluster-autoscaler.kubernetes.io/initializing'" in errors[0]


SELF_MANAGED = '{type: cluster-autoscaler, managed: false, version: "1.31.2"'


def test_an_unprefixed_gate_on_a_self_managed_autoscaler_is_a_warning() -> None:
    errors, warnings = check(document(autoscaler=SELF_MANAGED + "}"))
    assert errors == []
    assert len(warnings) == 1
    assert warnings[0].startswith("rules.yaml:6:13: warning: startupGates[0].taint.key: ")
    assert f"unless the autoscaler runs with --startup-taint={PLAIN}" in warnings[0]


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(f"{{startupTaint: [{PLAIN}]}}", id="startup-taint"),
        pytest.param(f"{{ignoreTaint: [{PLAIN}]}}", id="ignore-taint"),
    ],
)
def test_a_flag_naming_the_key_silences_the_warning(flags: str) -> None:
    assert check(document(autoscaler=f"{SELF_MANAGED}, flags: {flags}}}")) == ([], [])


def test_a_startup_taint_prefix_flag_covers_the_key_from_1_36() -> None:
    autoscaler = (
        '{type: cluster-autoscaler, managed: false, version: "1.36.0", '
        "flags: {startupTaintPrefix: [startup.example.com/]}}"
    )
    assert check(document(autoscaler=autoscaler)) == ([], [])


def test_a_startup_taint_prefix_flag_on_an_older_autoscaler_is_refused() -> None:
    errors, _ = check(
        document(
            autoscaler=f"{SELF_MANAGED}, flags: {{startupTaintPrefix: [startup.example.com/]}}}}"
        )
    )
    assert errors == [
        "rules.yaml:14:5: nodePools[0].autoscaler: --startup-taint-prefix exists from "
        "cluster-autoscaler 1.36; version 1.31.2 has no such flag: name each key in "
        "startupTaint instead"
    ]


def test_a_status_taint_gate_is_refused_with_the_startup_key_instead() -> None:
    errors, _ = check(document("status-taint.cluster-autoscaler.kubernetes.io/initializing"))
    assert errors == [
        "rules.yaml:6:5: startupGates[0].taint: 'status-taint.cluster-autoscaler.kubernetes.io/"
        "initializing' is a cluster-autoscaler status taint: it means 'ready but unusable', so "
        "the autoscaler counts the node as ready capacity and scales up again; a gate is a "
        f"startup taint: use '{PREFIXED}'"
    ]


def test_a_status_taint_gate_is_refused_even_without_an_autoscaler() -> None:
    errors, _ = check(document("status-taint.cluster-autoscaler.kubernetes.io/x", "{type: none}"))
    assert len(errors) == 1
    assert "is a cluster-autoscaler status taint" in errors[0]


@pytest.mark.parametrize("timeout", ["15m", "30m", "1h"])
def test_a_gate_timeout_reaching_the_15_minute_window_is_a_warning(timeout: str) -> None:
    errors, warnings = check(document(PREFIXED, timeout=timeout))
    assert errors == []
    assert len(warnings) == 1
    assert warnings[0].startswith("rules.yaml:8:5: warning: startupGates[0].timeout: ")
    assert "reaches cluster-autoscaler's 15m start-up window" in warnings[0]
    assert "more than 3 unready nodes that are also over 45% of the cluster" in warnings[0]


def test_a_gate_timeout_under_the_window_is_quiet() -> None:
    assert check(document(PREFIXED, timeout="14m59s")) == ([], [])


def test_a_gate_without_timeout_on_an_autoscaled_pool_is_a_warning() -> None:
    text = document(PREFIXED).replace("    timeout: 10m\n", "")
    _, warnings = check(text)
    assert len(warnings) == 1
    assert "waits forever" in warnings[0]


def test_no_autoscaler_means_no_autoscaler_findings() -> None:
    assert check(document(timeout="2h", autoscaler="{type: none}")) == ([], [])


EXTERNAL = "{type: karpenter, externalStartupTaints: [{key: %s, effect: NoSchedule}]}"


def test_a_gate_missing_from_an_external_karpenter_nodepool_is_an_error() -> None:
    errors, _ = check(document(autoscaler=EXTERNAL % "node.cilium.io/agent-not-ready"))
    assert len(errors) == 1
    assert errors[0].startswith("rules.yaml:6:5: startupGates[0].taint: gate ")
    assert "not in the startupTaints of Karpenter NodePool 'gpu'" in errors[0]
    assert "keep provisioning new ones" in errors[0]


def test_a_gate_listed_in_the_external_karpenter_nodepool_is_valid() -> None:
    text = document(autoscaler=EXTERNAL % PLAIN).replace("provider: oke", "provider: aks")
    assert check(text) == ([], [])


def test_a_karpenter_gate_must_match_by_effect_too() -> None:
    autoscaler = (
        f"{{type: karpenter, externalStartupTaints: [{{key: {PLAIN}, effect: NoExecute}}]}}"
    )
    errors, _ = check(document(autoscaler=autoscaler))
    assert len(errors) == 1


def test_a_karpenter_pool_on_oke_needs_its_node_class() -> None:
    errors, _ = check(document(autoscaler="{type: karpenter}"))
    assert errors == [
        "rules.yaml:14:5: nodePools[0].autoscaler: pool 'gpu' (oke) runs on Karpenter: give its "
        "nodeClassRef ({group, kind, name} of your Karpenter provider's node class); only aks "
        "pools have a default (AKS node auto-provisioning's AKSNodeClass 'default')"
    ]


@pytest.mark.parametrize(
    ("autoscaler", "message"),
    [
        (
            "{type: none, version: '1.30'}",
            "'version' applies to types cluster-autoscaler and karpenter only",
        ),
        ("{type: karpenter, managed: true}", "'managed' applies to type cluster-autoscaler only"),
        ("{type: cluster-autoscaler, nodePool: x}", "'nodePool' applies to type karpenter only"),
        ("{type: cluster-autoscaler, managed: false}", "needs its 'version' (e.g. '1.31')"),
        (
            "{type: cluster-autoscaler, flags: {startupTaint: [a.example.com/b]}}",
            "exposes no startup-taint flags (Azure/AKS#3276)",
        ),
        ("{type: cluster-autoscaler, version: latest}", "is not a cluster-autoscaler version"),
    ],
)
def test_autoscaler_settings_that_do_not_fit_are_refused(autoscaler: str, message: str) -> None:
    errors, _ = check(document(PREFIXED, autoscaler))
    assert len(errors) == 1
    assert message in errors[0]


def test_the_startup_prefix_is_refused_outside_startup_gates() -> None:
    text = HEADER + textwrap.dedent(
        f"""\
        labelTaints:
          - name: ci
            match: {{labels: {{pool: ci}}}}
            taint: {{key: {PREFIXED}, effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    errors, _ = check(text)
    assert errors == [
        f"rules.yaml:6:5: labelTaints[0].taint: '{PREFIXED}' carries cluster-autoscaler's "
        "startup-taint prefix, which is for startupGates only (the autoscaler reads such a taint "
        "as temporary); give this rule a key in your own domain, e.g. 'example.com/dedicated'"
    ]


def test_other_keys_of_the_autoscalers_domain_stay_refused_for_gates() -> None:
    errors, _ = check(document("cluster-autoscaler.kubernetes.io/scale-down-disabled"))
    assert len(errors) == 1
    assert "belongs to the cluster autoscaler" in errors[0]


def test_a_pool_the_stack_makes_autoscaled_is_checked_as_managed() -> None:
    """What the Pulumi program does for an AKS pool with `autoscaling` and no rules autoscaler."""
    plain = rules(
        document().removeprefix(HEADER).replace("    autoscaler: {type: cluster-autoscaler}\n", "")
    )
    assert autoscaler_findings(plain) == []
    findings = autoscaler_findings(plain, {"gpu": MANAGED_CA})
    assert [(f.severity, f.path) for f in findings] == [
        ("error", ("startupGates", 0, "taint", "key"))
    ]


NRC = "readiness.k8s.io/initializing"


def test_a_readiness_key_on_a_managed_autoscaler_is_an_error_naming_the_startup_key() -> None:
    errors, _ = check(document(NRC))
    assert len(errors) == 1
    assert f"rename the key '{PREFIXED}'" in errors[0]
    assert "takes no --startup-taint-prefix, so it never reads readiness.k8s.io/ keys" in errors[0]


@pytest.mark.parametrize(
    ("version", "advice"),
    [
        pytest.param(
            "1.35.2",
            "(--startup-taint-prefix=readiness.k8s.io/, which covers every readiness.k8s.io/ "
            "gate, needs cluster-autoscaler 1.36)",
            id="1.35",
        ),
        pytest.param(
            "1.36.0", " or --startup-taint-prefix=readiness.k8s.io/: if it does", id="1.36"
        ),
    ],
)
def test_a_readiness_key_on_a_self_managed_autoscaler_is_told_the_prefix_flag_from_1_36(
    version: str, advice: str
) -> None:
    autoscaler = f'{{type: cluster-autoscaler, managed: false, version: "{version}"}}'
    errors, warnings = check(document(NRC, autoscaler))
    assert errors == []
    assert len(warnings) == 1
    assert f"unless the autoscaler runs with --startup-taint={NRC}" in warnings[0]
    assert advice in warnings[0]
    assert "startupTaintPrefix: [readiness.k8s.io/]" in warnings[0]


def test_a_readiness_key_covered_by_the_prefix_flag_on_1_36_is_quiet() -> None:
    autoscaler = (
        '{type: cluster-autoscaler, managed: false, version: "1.36", '
        "flags: {startupTaintPrefix: [readiness.k8s.io/]}}"
    )
    assert check(document(NRC, autoscaler)) == ([], [])


KARPENTER_EXTERNAL = "{type: karpenter%s, externalStartupTaints: []}"


@pytest.mark.parametrize("version", ["v1.13.0", '"1.13"', "v1.14.1"])
def test_an_unlisted_readiness_gate_is_valid_on_karpenter_from_v1_13(version: str) -> None:
    text = document(NRC, KARPENTER_EXTERNAL % f", version: {version}")
    assert check(text) == ([], [])


@pytest.mark.parametrize(
    ("version", "said"),
    [
        pytest.param(", version: v1.12.1", "but Karpenter v1.12 is older", id="v1.12.1"),
        pytest.param(", version: v1.6.2", "but Karpenter v1.6 is older", id="oracle-v1.6.2"),
        pytest.param("", "but no autoscaler.version is given", id="unknown"),
    ],
)
def test_an_unlisted_readiness_gate_on_an_older_or_unknown_karpenter_is_an_error(
    version: str, said: str
) -> None:
    errors, _ = check(document(NRC, KARPENTER_EXTERNAL % version))
    assert len(errors) == 1
    assert "is not in the startupTaints of Karpenter NodePool 'gpu'" in errors[0]
    assert said in errors[0]
    assert "karpenter-provider-oci v1.0.0 is built on v1.6.2" in errors[0]


def test_an_unlisted_plain_gate_on_a_new_karpenter_is_told_the_readiness_key() -> None:
    errors, _ = check(document(PLAIN, KARPENTER_EXTERNAL % ", version: v1.13.0"))
    assert len(errors) == 1
    assert "or rename the gate 'readiness.k8s.io/initializing'" in errors[0]


def test_a_karpenter_version_that_is_not_one_is_refused() -> None:
    errors, _ = check(document(PREFIXED, KARPENTER_EXTERNAL % ", version: latest"))
    assert errors == [
        "rules.yaml:14:5: nodePools[0].autoscaler: version 'latest' is not a Karpenter version; "
        "write it as 'v1.13.0' (the sigs.k8s.io/karpenter version your provider is built on)"
    ]


ORACLE = (
    "{type: karpenter, nodeClassRef: {group: oci.oraclecloud.com, kind: OCINodeClass, "
    "name: default}, requirements: [{key: karpenter.sh/capacity-type, operator: In, "
    "values: [%s]}]}"
)


def test_preemptible_is_not_a_capacity_type_and_is_refused_naming_spot() -> None:
    errors, _ = check(document(PREFIXED, ORACLE % "preemptible"))
    assert errors == [
        "rules.yaml:14:186: nodePools[0].autoscaler.requirements[0].values[0]: 'preemptible' is "
        "not a Karpenter capacity type (pool 'gpu'): use on-demand, spot, reserved; "
        "karpenter-provider-oci launches OCI preemptible instances for spot"
    ]


def test_a_spot_oracle_pool_is_valid() -> None:
    assert check(document(PREFIXED, ORACLE % "spot")) == ([], [])


def _dry_run(text: str) -> str:
    return text.replace("    timeout: 10m\n", "    timeout: 10m\n    dryRun: true\n")


def test_a_dry_run_gate_is_not_checked_against_the_autoscaler() -> None:
    """It is never put on a node; listing it in an external NodePool would gate for real."""
    assert check(_dry_run(document(NRC, KARPENTER_EXTERNAL % ""))) == ([], [])
    assert check(_dry_run(document(NRC))) == ([], [])
