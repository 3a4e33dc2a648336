"""charts/nodegate, written by hand, tested with the real helm (built from its Go module, `make
helm`): `helm lint --strict` passes with no values, `helm template` renders the very objects the
manifest builder builds for the same settings (field by field, `chart_values`), the data files
are the builder's, values.schema.json accepts what Helm users pass and refuses a bad value naming
it, and every value is documented. Without helm these tests fail and say why, unless the machine
has no Go at all."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.text.errors import RulesError
from nodegate.localcluster import paths
from nodegate.localcluster.build import (
    ensure_chart_testing_built,
    ensure_helm_built,
    ensure_helm_unittest_built,
)
from nodegate.localcluster.versions import HELM4_VERSION
from nodegate.manifests.crd import noderules_crd
from nodegate.manifests.observability import alert_rules, dashboard_json
from nodegate.manifests.settings import Manifest
from tests.unit.manifests.chart_values import (
    CHART,
    builder_files,
    chart_defaults,
    coalesced,
    expected_objects,
    without_helm_labels,
)
from tests.unit.manifests.support import REPOSITORY, built_tool, example_document

RELEASE = "nodegate"
NAMESPACE = "nodegate-system"


def _built(build: Callable[[], Path], what: str) -> Path:
    return built_tool(build, what, "helm")


@pytest.fixture(scope="module")
def helm() -> Path:
    return _built(ensure_helm_built, "helm")


@pytest.fixture(scope="module")
def helm4() -> Path:
    return _built(lambda: ensure_helm_built(version=HELM4_VERSION), "helm 4")


def _run(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _template(
    helm: Path,
    values: dict[str, Any],
    tmp_path: Path,
    *flags: str,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    where = ["--namespace", namespace, "--include-crds"]
    return _run(helm, "template", release, str(CHART), "--values", str(path), *where, *flags)


def _objects(rendered: subprocess.CompletedProcess[str]) -> list[Manifest]:
    assert rendered.returncode == 0, rendered.stderr
    return [d for d in yaml.safe_load_all(rendered.stdout) if d]


def _key(manifest: Manifest) -> tuple[str, str, str]:
    meta = manifest["metadata"]
    return manifest["kind"], meta.get("namespace", ""), meta["name"]


def _differences(built: Any, rendered: Any, where: str) -> Iterator[str]:
    """Every field where the two objects differ, by path."""
    if isinstance(built, dict) and isinstance(rendered, dict):
        for key in sorted(built.keys() | rendered.keys()):
            yield from _differences(built.get(key), rendered.get(key), f"{where}.{key}")
    elif isinstance(built, list) and isinstance(rendered, list) and len(built) == len(rendered):
        for i, (b, r) in enumerate(zip(built, rendered, strict=True)):
            yield from _differences(b, r, f"{where}[{i}]")
    elif built != rendered or type(built) is not type(rendered):
        yield f"{where}: builder {built!r}, helm {rendered!r}"


def _drift(
    helm: Path,
    given: dict[str, Any],
    tmp_path: Path,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> list[str]:
    """Every field where `helm template` of `given` (release `release` in `namespace`)
    differs from the builder's installation for the same settings, Helm-only labels aside."""
    rendered = _template(helm, given, tmp_path, release=release, namespace=namespace)
    from_helm = sorted(map(without_helm_labels, _objects(rendered)), key=_key)
    values = coalesced(chart_defaults(), given)
    built = sorted(expected_objects(values, release, namespace), key=_key)
    assert [_key(o) for o in from_helm] == [_key(o) for o in built]
    return [
        found
        for b, r in zip(built, from_helm, strict=True)
        for found in _differences(b, r, "/".join(_key(b)))
    ]


IMAGE = {"image": {"repository": REPOSITORY}}
EXAMPLE = example_document().text

LABEL_TAINTS_ONLY = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
metadata: {name: dedicated}
spec:
  labelTaints:
    - name: ci-dedicated
      match: {labels: {example.com/dedicated: ci}}
      taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
      nodeMayLift: true
"""

TWO_GATES = {
    "apiVersion": "nodegate.dev/v1",
    "kind": "NodeRules",
    "metadata": {"name": "two-gates"},
    "spec": {
        "startupGates": [
            {
                "name": "first",
                "match": {"labels": {"pool": "gpu"}},
                "taint": {"key": "b.example.com/warming", "value": "w", "effect": "NoSchedule"},
                "formerKeys": ["a.example.com/old-warming"],
                "readyWhen": {"annotation": "example.com/ready=true"},
            },
            {
                "name": "second",
                "match": {"labels": {"pool": "gpu"}},
                "taint": {"key": "a.example.com/initializing", "effect": "NoExecute"},
                "readyWhen": {"csiDrivers": [{"name": "ebs.csi.aws.com"}]},
            },
        ]
    },
}

AGENTS = {
    "metadata": {"name": "agents"},
    "spec": {
        "nodeAgents": [
            {
                "name": "cilium",
                "taint": {"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"},
                "daemonSets": [{"namespace": "kube-system", "name": "cilium"}],
            }
        ]
    },
}


def _flat(text: str) -> str:
    """A rules file of the shape before NodeRules objects: the rules beside apiVersion, kind."""
    data = yaml.safe_load(text)
    return yaml.safe_dump({"apiVersion": data["apiVersion"], "kind": data["kind"], **data["spec"]})


EVERY_OPTION: dict[str, Any] = {
    "webhook": {"enabled": True, "port": 10443, "failurePolicy": "Fail", "timeoutSeconds": 5},
    "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
    "grafanaDashboard": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}, "interval": "15s"},
    "podMonitor": {"enabled": True, "interval": "1m"},
    "networkPolicy": {"enabled": True, "apiServerPorts": [443, 6443, 8443]},
    "oci": {"enabled": True, "compartments": "ocid1.compartment.oc1..a,ocid1.b", "region": "eu-1"},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["sys"]}]}
                ]
            }
        }
    },
}

CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "defaults-no-rules": (IMAGE, RELEASE, NAMESPACE),
    "example-rules-as-text": ({**IMAGE, "rules": EXAMPLE}, RELEASE, NAMESPACE),
    "label-taints-only": ({**IMAGE, "rules": LABEL_TAINTS_ONLY}, RELEASE, NAMESPACE),
    "rules-as-a-map-and-names": (
        {
            **IMAGE,
            "rules": TWO_GATES,
            "replicaCount": 3,
            "httpPort": 9090,
            "priorityClassName": "node-critical",
            "leaderElection": {"leaseName": "gates-leader"},
            "logLevel": "debug",
            "logFormat": "text",
        },
        "team-nodegate",
        "platform",
    ),
    "rules-and-node-rules-gates-in-order": (
        {
            **IMAGE,
            "rules": EXAMPLE,
            "nodeRules": [TWO_GATES, AGENTS],
            "tolerations": [
                {"key": "a.example.com/initializing", "operator": "Exists", "effect": "NoExecute"},
                {"operator": "Exists", "effect": "NoSchedule"},
            ],
        },
        RELEASE,
        NAMESPACE,
    ),
    "image-and-resources": (
        {
            "image": {
                "repository": REPOSITORY,
                "tag": "v9.9.9",
                "digest": "sha256:" + "ab" * 32,
                "pullPolicy": "Always",
            },
            "imagePullSecrets": ["regcred", {"name": "mirror"}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}},
            "nodeSelector": {"kubernetes.io/os": "linux", "pool": "system"},
            "tolerations": [
                {"key": "dedicated", "value": "system", "effect": "NoExecute"},
                {"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoExecute"},
                {"operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": None},
            ],
        },
        RELEASE,
        NAMESPACE,
    ),
    "a-digest-alone": (
        {"image": {"repository": REPOSITORY, "digest": "sha256:" + "c" * 64}},
        RELEASE,
        NAMESPACE,
    ),
    "switches-off": (
        {
            **IMAGE,
            "metrics": {"service": False, "annotateForScraping": False},
            "priorityClassName": "",
            "leaderElection": {"serverFence": False},
            "access": {
                "pods": False,
                "daemonSets": False,
                "csiNodes": False,
            },
            "rules": LABEL_TAINTS_ONLY,
            "webhook": {"enabled": True},
        },
        RELEASE,
        NAMESPACE,
    ),
    "every-option": ({**IMAGE, "rules": EXAMPLE, **EVERY_OPTION}, "nodegate-prod", "platform"),
    "cert-manager-webhook-and-dashboard-elsewhere": (
        {
            **IMAGE,
            "webhook": {"enabled": True, "certManager": {"enabled": True, "name": "ca"}},
            "grafanaDashboard": {"enabled": True, "namespace": "monitoring", "labels": {"a": "b"}},
            "prometheusRule": {"enabled": True},
        },
        RELEASE,
        NAMESPACE,
    ),
    "the-shape-before-objects-named-after-the-release": (
        {**IMAGE, "rules": _flat(EXAMPLE)},
        "gates-nodegate",
        NAMESPACE,
    ),
    # helm reads a values file's numbers as floats: a tag, a poll period and quantities as
    # JSON numbers render as the builder writes them (digits, quantities as strings).
    "numbers-written-as-json-numbers": (
        {
            "image": {"repository": REPOSITORY, "tag": 20240101},
            "oci": {
                "enabled": True,
                "compartments": "ocid1.compartment.oc1..a",
                "pollSeconds": 10**6,
            },
            "resources": {"requests": {"cpu": 0.5, "memory": 2**30}, "limits": {"cpu": 1}},
            "replicaCount": 3,
            "httpPort": 9090,
        },
        RELEASE,
        NAMESPACE,
    ),
    # A null drops the key from the coalesced values (helm's coalesce): none, not an error.
    "nulls-that-drop-the-default": (
        {
            **IMAGE,
            "unknownGateSeconds": None,
            "grafanaDashboard": {"enabled": True, "labels": None},
            "resources": {"limits": {"memory": None}},
        },
        RELEASE,
        NAMESPACE,
    ),
    # helm's longest release name (53), holding the chart's name: the objects' name is the
    # release's, and every suffixed name fits whole, as the builder writes it (the chart cuts a
    # Service's name only past 63 characters, from an objects' name of 56 on).
    "a-53-character-release": (
        {**IMAGE, "webhook": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
        "nodegate-release-of-fifty-three-characters-for-a-test",
        NAMESPACE,
    ),
}
"""Value sets, each with its release name and namespace."""


@pytest.mark.parametrize(("values", "release", "namespace"), CASES.values(), ids=list(CASES))
def test_helm_template_equals_the_builders_installation(
    helm: Path, values: dict[str, Any], release: str, namespace: str, tmp_path: Path
) -> None:
    differences = _drift(helm, values, tmp_path, release, namespace)
    assert not differences, "helm template drifts from the builder:\n" + "\n".join(differences)


def test_a_release_without_nodegate_in_its_name_names_its_objects_after_both(
    helm: Path, tmp_path: Path
) -> None:
    """`helm create`'s fullname: "<release>-nodegate"; the instance label is the release."""
    objects = _objects(_template(helm, IMAGE, tmp_path, release="gates", namespace="gates"))
    owned = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
    assert {o["metadata"]["name"] for o in owned if o["kind"] == "ClusterRole"} == {
        "gates-nodegate"
    }
    assert {o["metadata"]["labels"]["app.kubernetes.io/instance"] for o in owned} == {"gates"}


def test_helm_lint_strict_passes_with_no_values(helm: Path, helm4: Path) -> None:
    for binary in (helm, helm4):
        linted = _run(binary, "lint", "--strict", str(CHART))
        assert linted.returncode == 0, linted.stdout + linted.stderr
        assert "[WARNING]" not in linted.stdout, linted.stdout


def test_an_install_without_an_image_repository_fails_naming_the_value(
    helm: Path, tmp_path: Path
) -> None:
    refused = _template(helm, {}, tmp_path)
    assert refused.returncode != 0
    assert "image.repository: where you pushed the nodegate image" in refused.stderr


def test_the_crd_alert_and_dashboard_files_are_the_builders() -> None:
    """crds/ and files/ hold the builder's CRD, alerts and dashboard, byte for byte."""
    for relative, text in builder_files().items():
        on_disk = (CHART / relative).read_text(encoding="utf-8")
        assert on_disk == text, f"{relative} is stale: {REWRITE}"


def test_the_alert_files_split_the_builders_alerts_at_the_webhooks() -> None:
    files = CHART / "files"
    alerts = yaml.safe_load((files / "alerts.yaml").read_text(encoding="utf-8"))
    webhook = yaml.safe_load((files / "webhook-alerts.yaml").read_text(encoding="utf-8"))
    assert alerts == alert_rules("RELEASE_NAMESPACE")
    assert alerts + webhook == alert_rules("RELEASE_NAMESPACE", webhook=True)
    crd = yaml.safe_load((CHART / "crds" / "noderules.nodegate.dev.yaml").read_text("utf-8"))
    assert crd == noderules_crd()
    assert (files / "grafana-dashboard.json").read_text(encoding="utf-8") == dashboard_json()


REWRITE = "rewrite them with `.venv/bin/python -m tests.unit.manifests.chart_values`"


def _value_paths(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Every leaf of values.yaml by its dotted path (a map that is a value itself, such as
    `resources.requests` or `nodeSelector`, is its own leaf)."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in MAP_VALUES:
            yield from _value_paths(value, f"{path}.")
        else:
            yield path


MAP_VALUES = {"resources", "nodeSelector", "grafanaDashboard.labels"}
"""Maps in values.yaml documented as one value."""


def test_every_value_is_documented_in_the_charts_readme() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.MULTILINE))
    missing = [p for p in _value_paths(chart_defaults()) if p not in documented]
    assert not missing, f"charts/nodegate/README.md does not say {missing}"


def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text("utf-8"))
    return loaded


def test_the_schema_accepts_values_yaml() -> None:
    jsonschema.validate(chart_defaults(), _schema())


def test_the_schema_refuses_keys_it_does_not_know() -> None:
    with pytest.raises(jsonschema.ValidationError, match="replicas"):
        jsonschema.validate({**chart_defaults(), "replicas": 2}, _schema())


SET_BY_HELM_USERS = [
    "replicaCount=3",
    "resources.limits.cpu=1",
    "resources.requests.cpu=0.5",
    "resources.requests.ephemeral-storage=1Gi",
    "imagePullSecrets[0].name=regcred",
    "podAnnotations.example\\.com/team=nodes",
    "podLabels.team=nodes",
    "extraArgs[0]=--max-untaint-share=0.2",
    "env[0].name=HTTPS_PROXY",
    "env[0].value=http://proxy:3128",
    "serviceAccount.annotations.iam\\.example\\.com/role=nodegate",
    "image.tag=1.2",
    "dryRun=true",
    "nodeRules[0].metadata.name=team-a",
    "nodeRules[0].spec.labelTaints=null",
]


def test_the_schema_accepts_what_helm_users_pass(helm: Path, tmp_path: Path) -> None:
    flags = [arg for s in SET_BY_HELM_USERS for arg in ("--set", s)]
    rendered = _objects(_template(helm, IMAGE, tmp_path, *flags))
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "256Mi"}
    assert container["image"] == f"{REPOSITORY}:1.2"


BAD_VALUES = {
    "replicas-zero": ({"replicaCount": 0}, "/replicaCount"),
    "repository": ({"image": {"repository": "Not/A:Repo"}}, "/image/repository"),
    "digest": ({"image": {"digest": "sha256:short"}}, "/image/digest"),
    "pull-policy": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    "cpu": ({"resources": {"requests": {"cpu": "lots"}}}, "/resources/requests/cpu"),
    "unknown": ({"webhok": {}}, "webhok"),
    "old-namespace-value": ({"namespace": "nodegate-system"}, "namespace"),
    "failure-policy": ({"webhook": {"failurePolicy": "Maybe"}}, "/webhook/failurePolicy"),
    "issuer-without-name": (
        {"webhook": {"certManager": {"enabled": True}}},
        "/webhook/certManager/name",
    ),
    "oci-without-compartments": ({"oci": {"enabled": True}}, "/oci/compartments"),
    "service-monitor-without-service": (
        {"serviceMonitor": {"enabled": True}, "metrics": {"service": False}},
        "/metrics/service",
    ),
    "api-server-port": (
        {"networkPolicy": {"apiServerPorts": [0]}},
        "/networkPolicy/apiServerPorts/0",
    ),
    "access": ({"access": {"pods": "no"}}, "/access/pods"),
    "node-rules-without-a-name": ({"nodeRules": [{"spec": {}}]}, "/nodeRules/0"),
    "dry-run-with-the-webhook": (
        {"dryRun": True, "webhook": {"enabled": True}},
        "at '/webhook/enabled': value must be false",
    ),
    "pod-labels-of-the-selector": (
        {"podLabels": {"app.kubernetes.io/name": "other"}},
        "/podLabels/app.kubernetes.io~1name",
    ),
    "env-value-number": ({"env": [{"name": "RETRIES", "value": 3}]}, "/env/0/value"),
}


@pytest.mark.parametrize(("change", "named"), BAD_VALUES.values(), ids=list(BAD_VALUES))
def test_the_schema_refuses_a_bad_value_naming_it(
    helm: Path, change: dict[str, Any], named: str, tmp_path: Path
) -> None:
    values = coalesced({**IMAGE}, change)
    refused = _template(helm, values, tmp_path)
    assert refused.returncode != 0, f"helm accepted {change}"
    assert "values don't meet the specifications of the schema" in refused.stderr
    assert named in refused.stderr, refused.stderr


def test_a_dry_run_with_the_webhook_fails_without_the_schema_too(
    helm: Path, tmp_path: Path
) -> None:
    """`nodegate reconcile` refuses --dry-run with --webhook-port: the chart never renders such
    a pod, even with --skip-schema-validation."""
    values = {**IMAGE, "dryRun": True, "webhook": {"enabled": True}}
    refused = _template(helm, values, tmp_path, "--skip-schema-validation")
    assert refused.returncode != 0, "helm rendered a dry run that serves the webhook"
    assert "dryRun: a dry run serves no admission webhook" in refused.stderr, refused.stderr
    assert "set webhook.enabled false" in refused.stderr


LONGEST_RELEASE = "long-release-name-of-fifty-three-characters-for-tests"
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_every_name_fits_its_object_for_a_53_character_release(helm: Path, tmp_path: Path) -> None:
    """helm takes release names of up to 53 characters: every object's name stays within its
    kind's limit (a Service's, and the Certificate's, 63; any other's 253)."""
    assert len(LONGEST_RELEASE) == 53
    for webhook in (
        {"enabled": True},
        {"enabled": True, "certManager": {"enabled": True, "name": "ca"}},
    ):
        values = {**IMAGE, **EVERY_OPTION, "webhook": webhook}
        objects = _objects(_template(helm, values, tmp_path, release=LONGEST_RELEASE))
        for manifest in objects:
            name = manifest["metadata"]["name"]
            if manifest["kind"] in {"Service", "Certificate"}:
                assert len(name) <= 63 and DNS_1035.match(name), name
            assert len(name) <= 253, name
        services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
        assert services == {f"{LONGEST_RELEASE}-n-metrics", f"{LONGEST_RELEASE}-n-webhook"}


NAMELESS = EXAMPLE.replace("metadata:\n  name: example\n", "metadata: {}\n")
STRAY = EXAMPLE + "labelTaints: []\n"


@pytest.mark.parametrize(
    ("rules", "named"),
    [
        (NAMELESS, "rules: the NodeRules object has no name: metadata: {name: NAME}"),
        (STRAY, "rules: labelTaints is no field of a NodeRules object"),
        ("- a list\n", "rules: the text is no YAML mapping of a NodeRules object"),
        (
            EXAMPLE + "---\n" + LABEL_TAINTS_ONLY,
            "rules: the text holds 2 YAML documents (---), and the chart makes one NodeRules "
            "object of rules: give each further object in nodeRules",
        ),
        ("# the rules to come\n", "rules: the text holds no NodeRules object"),
        ("", "rules: the text holds no NodeRules object"),
    ],
    ids=["no-name", "a-rule-field-beside-spec", "no-mapping", "two-documents", "comments", "empty"],
)
def test_rules_text_that_is_no_noderules_object_is_refused_naming_why(
    helm: Path, rules: str, named: str, tmp_path: Path
) -> None:
    """The chart reads the `rules` value as `rules_object` reads a rules file: where nodegate
    refuses the file, helm fails, naming the fix."""
    with pytest.raises(RulesError):
        RulesDocument.parse(rules, "rules.yaml")
    refused = _template(helm, {**IMAGE, "rules": rules}, tmp_path)
    assert refused.returncode != 0, "helm rendered a NodeRules object of rules it should refuse"
    assert named in refused.stderr, refused.stderr


def test_helm_unittest_suites_pass() -> None:
    """charts/nodegate/tests: the value switches, in helm-unittest's own format."""
    binary = _built(ensure_helm_unittest_built, "helm-unittest")
    ran = subprocess.run(
        [str(binary), "--color=false", str(CHART)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Tests:       0 passed" not in ran.stdout
    snapshots = CHART / "tests" / "__snapshot__"  # made by every run; no suite takes snapshots
    if snapshots.is_dir() and not any(snapshots.iterdir()):
        snapshots.rmdir()


def test_ct_lint_passes(helm: Path, tmp_path: Path) -> None:
    """chart-testing's `ct lint` (yamllint, the Chart.yaml schema, `helm lint` with every
    ci/*-values.yaml), as node-readiness-controller's chart workflow runs it; no maintainer
    lookups (network) and no version-increment check (no target branch here)."""
    binary = _built(ensure_chart_testing_built, "chart-testing")
    tools = Path(sys.executable).parent  # yamllint and yamale, from the dev extras
    ran = subprocess.run(
        [
            str(binary),
            "lint",
            "--charts",
            str(CHART),
            "--validate-maintainers=false",
            "--check-version-increment=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            "CT_CONFIG_DIR": str(paths.chart_testing_config()),
            "PATH": f"{helm.parent}:{tools}:/usr/bin:/bin",
            "HOME": str(tmp_path),
        },
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "example-values.yaml" in ran.stdout + ran.stderr


def test_helm4_renders_what_the_builder_builds(helm4: Path, tmp_path: Path) -> None:
    values, release, namespace = CASES["every-option"]
    assert not _drift(helm4, values, tmp_path, release, namespace)
