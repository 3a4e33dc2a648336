"""charts/nodegate, tested with the real helm (built from its Go module, `make helm`): it is what
`nodegate chart` generates, `helm lint --strict` passes, `helm template` renders the very objects
the manifest builder builds for the same settings (field by field), and values.schema.json makes
helm refuse a bad value, naming it. Without helm these tests fail and say why, unless the
machine has no Go at all."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

from nodegate.cli.main import app
from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.rules_object import rules_file_json_schema
from nodegate.core.text.errors import RulesError
from nodegate.localcluster import paths
from nodegate.localcluster.build import (
    ensure_chart_testing_built,
    ensure_helm_built,
    ensure_helm_unittest_built,
)
from nodegate.localcluster.versions import HELM4_VERSION
from nodegate.manifests.build import Manifest, build_manifests, rules_object
from nodegate.manifests.chart.files import chart_files
from nodegate.manifests.chart.values import (
    MAP_SETTINGS,
    default_values,
    release_settings,
    rules_text,
    value_paths,
)
from nodegate.manifests.settings import DeploySettings
from tests.unit.manifests.support import (
    NO_POD_GATES,
    REPO,
    REPOSITORY,
    built_tool,
    example_document,
)

CHART = REPO / "charts" / "nodegate"
REGENERATE = "make chart"
RELEASE_NAMESPACE = str(DeploySettings.model_fields["namespace"].default)
"""The release namespace of the equality cases: the builder's default namespace."""


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
    chart: Path = CHART,
    namespace: str = RELEASE_NAMESPACE,
    *,
    crds: bool = False,
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values), encoding="utf-8")
    where = ["--namespace", namespace, *(["--include-crds"] if crds else [])]
    return _run(helm, "template", "nodegate", str(chart), "--values", str(path), *where)


def _drift(
    helm: Path,
    values: dict[str, Any],
    tmp_path: Path,
    chart: Path = CHART,
    namespace: str = RELEASE_NAMESPACE,
) -> list[str]:
    """Every field where `helm template` (a release in `namespace`) differs from the builder
    for these values: its objects and, with rulesSource objects, the rules as a NodeRules
    object (`rules_object`), which the ways in apply after them."""
    # With crds/ (the NodeRules CRD), which the builder's objects hold too.
    rendered = _template(helm, values, tmp_path, chart, namespace, crds=True)
    assert rendered.returncode == 0, rendered.stderr
    from_helm = sorted((d for d in yaml.safe_load_all(rendered.stdout) if d), key=_key)
    merged = _coalesced(default_values(), values)
    document = RulesDocument.parse(rules_text(merged), "rules")
    settings = release_settings(merged, namespace)
    objects = build_manifests(document, settings)
    if settings.rules_source == "objects":
        objects.append(rules_object(document, settings))
    built = sorted(objects, key=_key)
    assert [_key(o) for o in from_helm] == [_key(o) for o in built]
    return [
        found
        for b, r in zip(built, from_helm, strict=True)
        for found in _differences(_comparable(b), _comparable(r), "/".join(_key(b)))
    ]


def _coalesced(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The values a template sees: helm merges maps into values.yaml's (a null drops a key), so
    the settings they stand for are the merged ones (e.g. `resources.limits: {cpu: "2"}` keeps
    the default memory limit)."""
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _coalesced(merged[key], value)
        else:
            merged[key] = value
    return merged


def _key(manifest: Manifest) -> tuple[str, str, str]:
    meta = manifest["metadata"]
    return manifest["kind"], meta.get("namespace", ""), meta["name"]


def _differences(built: Any, rendered: Any, where: str) -> list[str]:
    """Every field where the two objects differ, by path."""
    if isinstance(built, dict) and isinstance(rendered, dict):
        return [
            found
            for key in sorted(built.keys() | rendered.keys())
            for found in _differences(built.get(key), rendered.get(key), f"{where}.{key}")
        ]
    if isinstance(built, list) and isinstance(rendered, list) and len(built) == len(rendered):
        return [
            found
            for i, (b, r) in enumerate(zip(built, rendered, strict=True))
            for found in _differences(b, r, f"{where}[{i}]")
        ]
    if built == rendered and type(built) is type(rendered):
        return []
    return [f"{where}: builder {built!r}, helm {rendered!r}"]


def test_chart_is_what_nodegate_chart_generates() -> None:
    expected = chart_files(example_document())
    on_disk = {
        str(p.relative_to(CHART)): p.read_text(encoding="utf-8")
        for p in CHART.rglob("*")
        if p.is_file() and p.relative_to(CHART).parts[0] != "tests"  # helm-unittest's, by hand
    }
    assert on_disk == expected, f"charts/nodegate is stale: run `{REGENERATE}`"


def test_helm_lint_strict(helm: Path) -> None:
    """With the example values that ct lint also uses (charts/nodegate/ci/)."""
    example = CHART / "ci" / "example-values.yaml"
    linted = _run(helm, "lint", "--strict", str(CHART), "--values", str(example))
    assert linted.returncode == 0, linted.stdout + linted.stderr


def _values(**overrides: Any) -> dict[str, Any]:
    values = default_values()
    values["image"]["repository"] = REPOSITORY
    values["rules"] = example_document().text
    for path, value in overrides.items():
        *parents, leaf = path.split("__")
        node = values
        for key in parents:
            node = node[key]
        node[leaf] = value
    return values


EVERY_OPTION = {
    "webhook": {"enabled": True, "port": 10443, "failurePolicy": "Fail", "timeoutSeconds": 5},
    "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
    "grafanaDashboard": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}, "interval": "15s"},
    "podMonitor": {"enabled": True, "interval": "1m"},
    "networkPolicy": {"enabled": True, "apiServerPorts": [443, 6443, 8443]},
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


def _flat(text: str) -> str:
    """A NodeRules file in the shape before objects: its rules beside apiVersion and kind."""
    data = yaml.safe_load(text)
    return yaml.safe_dump(
        {"apiVersion": data["apiVersion"], "kind": data["kind"], **data["spec"]}, sort_keys=False
    )


OCI = {"enabled": True, "compartments": "ocid1.compartment.oc1..example", "region": "eu-1"}
"""OCI conditions on: their grant and flags come after the NodeRules and before the webhook's
in the ClusterRole, after the webhook's in the args."""

FLAT_EXAMPLE = _flat(example_document().text)
"""The example rules in the shape before objects (which `rules_object` converts, naming the
object after the installation)."""

CASES = {
    "defaults": _values(),
    "replicas-and-names": _values(
        replicas=3,
        namespace="platform",
        name="gates",
        rulesConfigMap="gate-rules",
        httpPort=9090,
        priorityClassName="node-critical",
        leaderElection__leaseName="gates-leader",
    ),
    "image-and-resources": _values(
        image__tag="v9.9.9",
        image__digest="sha256:" + "ab" * 32,
        image__pullPolicy="Always",
        image__pullSecrets=["regcred", "mirror"],
        resources={
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "2", "memory": None},
        },
        nodeSelector={"kubernetes.io/os": "linux", "pool": "system"},
        tolerations=[
            {"operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoExecute"},
            {
                "key": "startup-taint.cluster-autoscaler.kubernetes.io/initializing",
                "operator": "Exists",
                "effect": "NoSchedule",
            },
        ],
    ),
    "no-namespace-no-metrics-service-no-priority-no-server-fence": _values(
        createNamespace=False,
        metrics={"service": False, "annotateForScraping": False},
        priorityClassName="",
        leaderElection__serverFence=False,
    ),
    "every-option": _values(**EVERY_OPTION),
    "webhook-with-cert-manager-and-dashboard-elsewhere": _values(
        webhook={"enabled": True, "certManager": {"enabled": True, "name": "ca", "kind": "Issuer"}},
        grafanaDashboard={"enabled": True, "namespace": "monitoring", "labels": {"a": "b"}},
        prometheusRule={"enabled": True},
    ),
    "rules-as-a-map": _values(rules=yaml.safe_load(example_document().text)),
    "rules-objects": _values(rulesSource="objects"),
    "rules-objects-as-a-map-and-names": _values(
        rulesSource="objects",
        rules=yaml.safe_load(example_document().text),
        namespace="platform",
        name="gates",
        rulesConfigMap="gate-rules",
    ),
    "oci-and-webhook": _values(oci=OCI, webhook={"enabled": True}),
    "rules-objects-every-option": _values(rulesSource="objects", oci=OCI, **EVERY_OPTION),
    "rules-objects-of-the-shape-before-objects": _values(
        rulesSource="objects", name="gates", rules=FLAT_EXAMPLE
    ),
}


def _comparable(manifest: Manifest) -> Manifest:
    """The rules ConfigMap of a `rules` map holds helm's `toYaml` of it: its content counts."""
    data = manifest.get("data") or {}
    if manifest["kind"] == "ConfigMap" and "rules.yaml" in data:
        manifest = copy.deepcopy(manifest)
        manifest["data"]["rules.yaml"] = yaml.safe_load(data["rules.yaml"])
    return manifest


@pytest.mark.parametrize("values", list(CASES.values()), ids=list(CASES))
def test_helm_template_equals_the_builder(
    helm: Path, values: dict[str, Any], tmp_path: Path
) -> None:
    differences = _drift(helm, values, tmp_path)
    assert not differences, "helm template drifts from the builder:\n" + "\n".join(differences)


EVERY_REFERENCE = {
    **EVERY_OPTION,
    "webhook": {"enabled": True, "certManager": {"enabled": True, "name": "ca"}},
    "grafanaDashboard": {"enabled": True},
}
"""Every object and reference that names the namespace, the webhook's cert-manager
Certificate (its DNS names) and inject-ca-from annotation included."""


@pytest.mark.parametrize(
    "values", [EVERY_OPTION, EVERY_REFERENCE], ids=["every-option", "cert-manager-webhook"]
)
def test_a_release_without_a_namespace_value_puts_everything_in_the_release_namespace(
    helm: Path, values: dict[str, Any], tmp_path: Path
) -> None:
    """`helm install -n platform` and no `namespace` value: every namespaced object and every
    reference (the args, RoleBinding subjects, monitors' namespaceSelector, the webhook's
    Service and Certificate, the dashboard) is in `platform`, as the builder writes them for
    namespace `platform`, and nothing names the builder's default namespace."""
    given = _values(**values)
    assert given["namespace"] == ""
    rendered = _template(helm, given, tmp_path, namespace="platform")
    assert rendered.returncode == 0, rendered.stderr
    objects = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    namespaced = {o["metadata"].get("namespace") for o in objects if "namespace" in o["metadata"]}
    assert namespaced == {"platform"}
    assert "Namespace" not in {o["kind"] for o in objects}  # helm's to make (-n, created)
    assert RELEASE_NAMESPACE not in rendered.stdout
    assert not _drift(helm, given, tmp_path, namespace="platform")


@pytest.mark.parametrize("namespace", ["", "platform"], ids=["release-namespace", "named-alike"])
def test_the_chart_never_makes_the_release_namespace(
    helm: Path, namespace: str, tmp_path: Path
) -> None:
    """helm keeps the release in its namespace, so it exists (or `--create-namespace` made it);
    a chart Namespace object of the same name would make helm refuse the install."""
    rendered = _template(helm, _values(namespace=namespace), tmp_path, namespace="platform")
    assert rendered.returncode == 0, rendered.stderr
    assert "Namespace" not in {d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d}


def test_an_explicit_namespace_value_overrides_the_release_namespace(
    helm: Path, tmp_path: Path
) -> None:
    """As before the release namespace counted: `--set namespace=nodegate-system` keeps an
    installation in place whatever namespace helm keeps the release in, and the chart makes
    that namespace (createNamespace)."""
    values = _values(namespace="nodegate-system")
    rendered = _template(helm, values, tmp_path, namespace="platform")
    assert rendered.returncode == 0, rendered.stderr
    objects = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    assert {"nodegate-system"} == {
        o["metadata"]["namespace"] for o in objects if "namespace" in o["metadata"]
    }
    assert ("Namespace", "nodegate-system") in {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert "platform" not in rendered.stdout
    assert not _drift(helm, values, tmp_path, namespace="platform")


def test_every_option_renders_every_kind_the_builder_makes(helm: Path, tmp_path: Path) -> None:
    rendered = _template(helm, CASES["every-option"], tmp_path)
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d}
    assert {
        "MutatingWebhookConfiguration",
        "Secret",
        "PrometheusRule",
        "ServiceMonitor",
        "PodMonitor",
        "NetworkPolicy",
    } <= kinds


BAD_RULES = {
    "apiVersion": "nodegate.dev/v1",
    "kind": "NodeRules",
    "metadata": {"name": "bad"},
    "spec": {
        "labelTaints": [
            {
                "name": "a",
                "match": {"labels": {"a": "b"}},
                "taint": {"key": "k", "effect": "NoSchedul"},
                "nodeMayLift": True,
            }
        ]
    },
}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"replicas": 0}, "/replicas"),
        ({"image": {"repository": "Not/A:Repo"}}, "/image/repository"),
        ({"image": {"repository": ""}}, "/image/repository"),
        ({"image": {"digest": "sha256:short"}}, "/image/digest"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"namespace": "Upper_Case"}, "/namespace"),
        ({"createNamespace": "yes"}, "/createNamespace"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "/resources/requests/cpu"),
        ({"webhok": {}}, "webhok"),
        ({"webhook": {"enabled": True, "failurePolicy": "Maybe"}}, "/webhook/failurePolicy"),
        ({"webhook": {"certManager": {"enabled": True}}}, "/webhook/certManager/name"),
        ({"tolerations": [{"key": "a", "effect": "NoSchedule"}]}, "/tolerations/0"),
        (
            {"serviceMonitor": {"enabled": True}, "metrics": {"service": False}},
            "/metrics/service",
        ),
        ({"networkPolicy": {"apiServerPorts": [0]}}, "/networkPolicy/apiServerPorts/0"),
        ({"rules": None}, "missing property 'rules'"),
        ({"rules": BAD_RULES}, "/rules/spec/labelTaints/0/taint/effect"),
    ],
    ids=[
        "replicas",
        "repository",
        "no-repository",
        "digest",
        "pull-policy",
        "namespace",
        "create-namespace",
        "cpu",
        "unknown",
        "failure-policy",
        "issuer-without-name",
        "toleration-without-operator",
        "service-monitor-without-service",
        "api-server-port",
        "no-rules",
        "rules-map-with-a-bad-effect",
    ],
)
def test_values_schema_refuses_an_invalid_value_naming_it(
    helm: Path, change: dict[str, Any], named: str, tmp_path: Path
) -> None:
    values = copy.deepcopy(_values())
    for key, value in change.items():
        values[key] = (
            _coalesced(values[key], value)
            if isinstance(value, dict) and isinstance(values.get(key), dict)
            else value
        )
    rendered = _template(helm, values, tmp_path)
    assert rendered.returncode != 0, f"helm accepted {change}"
    assert "values don't meet the specifications of the schema" in rendered.stderr
    assert named in rendered.stderr, rendered.stderr


NAMELESS = example_document().text.replace("metadata:\n  name: example\n", "metadata: {}\n")
STRAY = example_document().text + "labelTaints: []\n"


@pytest.mark.parametrize(
    ("rules", "named"),
    [
        (NAMELESS, "rules: the NodeRules object has no name: metadata: {name: NAME}"),
        (STRAY, "rules: labelTaints is no field of a NodeRules object"),
    ],
    ids=["no-name", "a-rule-field-beside-spec"],
)
def test_rules_objects_refuse_rules_text_that_is_no_noderules_object(
    helm: Path, rules: str, named: str, tmp_path: Path
) -> None:
    """With rulesSource objects, the chart reads the rules value as `rules_object` reads a rules
    file: where nodegate refuses the file, helm fails, naming the fix."""
    with pytest.raises(RulesError):
        RulesDocument.parse(rules, "rules.yaml")
    refused = _template(helm, _values(rulesSource="objects", rules=rules), tmp_path)
    assert refused.returncode != 0, "helm rendered a NodeRules object of rules it should refuse"
    assert named in refused.stderr, refused.stderr


def _setting_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every DeploySettings field by its camelCase path, read from the model itself."""
    paths: set[str] = set()
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        members = [info.annotation, *typing.get_args(info.annotation)]
        nested = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
        section = next(iter(nested), None)
        if section is not None and path not in MAP_SETTINGS:
            paths |= _setting_paths(section, f"{path}.")
        else:
            paths.add(path)
    return paths


def test_every_deploy_setting_is_a_chart_value_and_documented() -> None:
    values = default_values()
    settings = {p for p in value_paths(values) if not p.endswith(".enabled")} - {"rules"}
    assert settings == _setting_paths(DeploySettings)
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    missing = [p for p in value_paths(values) if f"| `{p}` |" not in readme]
    assert not missing, f"charts/nodegate/README.md lacks {missing}: run `{REGENERATE}`"


def test_values_yaml_is_every_default_with_its_description() -> None:
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text) == default_values()
    assert "# Replicas: one leads" in text


def test_schema_embeds_the_rules_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(default_values())
    rules = schema["properties"]["rules"]["else"]
    assert rules["properties"].keys() == rules_file_json_schema()["properties"].keys()
    assert set(schema["$defs"]) == {f"rules.{d}" for d in rules_file_json_schema()["$defs"]}


def test_a_rules_value_with_other_gates_is_refused(helm: Path, tmp_path: Path) -> None:
    """The Deployment's gate tolerations and the RBAC come from the rules the chart was
    generated with; helm refuses rules whose gates differ rather than render a reconciler that
    cannot run on its own gated nodes."""
    rendered = _template(helm, _values(rules=NO_POD_GATES), tmp_path)
    assert rendered.returncode != 0, "helm rendered rules with other gates"
    assert "regenerate the chart for these rules" in rendered.stderr
    assert "startup.example.com/initializing:NoSchedule" in rendered.stderr


def test_a_rules_edit_that_keeps_the_gates_renders(helm: Path, tmp_path: Path) -> None:
    values = _values()
    values["rules"] += "# an edit that keeps every gate\n"
    rendered = _template(helm, values, tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert "an edit that keeps every gate" in rendered.stdout


TWO_GATES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
metadata: {name: two-gates}
spec:
  startupGates:
    - name: first
      match: {labels: {pool: gpu}}
      taint: {key: b.example.com/warming, value: wait, effect: NoSchedule}
      formerKeys: [a.example.com/old-warming]
      readyWhen: {annotation: example.com/ready=true}
    - name: second
      match: {labels: {pool: gpu}}
      taint: {key: a.example.com/initializing, value: wait, effect: NoExecute}
      readyWhen: {annotation: example.com/ready=true}
"""


def _generated(document: RulesDocument, tmp_path: Path) -> Path:
    chart = tmp_path / "chart"
    for name, text in chart_files(document).items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text, encoding="utf-8")
    return chart


NO_GATES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
metadata: {name: no-gates}
spec:
  labelTaints:
    - name: ci-dedicated
      match: {labels: {example.com/dedicated: ci}}
      taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
      nodeMayLift: true
"""


def test_the_same_gates_in_another_order_render(helm: Path, tmp_path: Path) -> None:
    """The guard compares the gates in canonical form, not as the generating file lists them."""
    chart = _generated(RulesDocument.parse(TWO_GATES, "two-gates.yaml"), tmp_path)
    data = yaml.safe_load(TWO_GATES)
    data["spec"]["startupGates"].reverse()
    values = {"image": {"repository": REPOSITORY}, "rules": data}
    rendered = _template(helm, values, tmp_path, chart)
    assert rendered.returncode == 0, rendered.stderr


def test_rules_objects_refuse_rules_text_that_is_no_mapping(helm: Path, tmp_path: Path) -> None:
    """Text that is no YAML mapping passes the gates guard of a chart whose rules have no
    gates, reads or records (it finds none in it either); helm still renders no NodeRules object
    of it."""
    chart = _generated(RulesDocument.parse(NO_GATES, "rules.yaml"), tmp_path)
    values = _values(rulesSource="objects", rules="- a list\n")
    refused = _template(helm, values, tmp_path, chart)
    assert refused.returncode != 0, "helm rendered a NodeRules object of a list"
    assert "rules: the text is no YAML mapping of a NodeRules object" in refused.stderr


@pytest.mark.parametrize("source", ["configmap", "objects"])
@pytest.mark.parametrize("rules", [TWO_GATES, NO_GATES], ids=["two-gates", "no-gates"])
def test_a_chart_generated_for_other_rules_renders_the_builders_objects(
    helm: Path, rules: str, source: str, tmp_path: Path
) -> None:
    chart = _generated(RulesDocument.parse(rules, "rules.yaml"), tmp_path)
    values = _values(rules=rules, rulesSource=source, **EVERY_OPTION)
    assert not _drift(helm, values, tmp_path, chart)


def test_helm_unittest_suites_pass() -> None:
    """charts/nodegate/tests: the chart users' contracts in helm-unittest's own format."""
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


def test_ct_lint_passes(helm: Path, tmp_path: Path) -> None:
    """chart-testing's `ct lint` (yamllint, the Chart.yaml schema, `helm lint` with every
    ci/*-values.yaml), as node-readiness-controller's chart workflow runs it; no maintainer
    lookups (network) and no version-increment check (no target branch here). `ct install`
    needs pods to become ready, which this control plane cannot run (no container runtime):
    tests/e2e/test_helm_chart.py installs with helm and runs the reconciler instead."""
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


def test_helm4_lints_and_renders_what_the_builder_builds(helm4: Path, tmp_path: Path) -> None:
    """Helm 4 (server-side apply by default; its e2e install is in tests/e2e/test_helm_chart.py)
    renders the chart as helm 3 does: field for field the builder's objects."""
    example = CHART / "ci" / "example-values.yaml"
    linted = _run(helm4, "lint", "--strict", str(CHART), "--values", str(example))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert not _drift(helm4, CASES["every-option"], tmp_path)
    refused = _template(helm4, _values(rules=BAD_RULES), tmp_path)
    assert "/rules/spec/labelTaints/0/taint/effect" in refused.stderr, refused.stderr


def test_nodegate_chart_writes_the_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "nodegate"
    (out / "templates").mkdir(parents=True)
    (out / "templates" / "left-over.yaml").write_text("stale", encoding="utf-8")
    result = CliRunner().invoke(app, ["chart", "--rules", "examples/rules.yaml", "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = {
        str(p.relative_to(out)): p.read_text(encoding="utf-8")
        for p in out.rglob("*")
        if p.is_file()
    }
    assert written == chart_files(example_document())  # the left-over template is gone


READS = {
    "init-pods": "readyWhen: {pods: {namespace: kube-system, selector: {app: init}}}",
    "backfill": "readyWhen: {annotation: example.com/ready=true}\n    backfill: true",
    "csi": "readyWhen: {csiDrivers: [{name: ebs.csi.aws.com}]}",
}
AGENTS = {
    "none": "",
    "daemon-sets": "daemonSets: [{namespace: kube-system, name: cilium}]",
    "csi-only": "csiDrivers: [{name: ebs.csi.aws.com}]",
}


def _reading(gate: str, agent: str) -> str:
    text = (
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nstartupGates:\n  - name: warmup\n"
        "    match: {labels: {pool: gpu}}\n"
        "    taint: {key: startup.example.com/initializing, value: wait, effect: NoSchedule}\n"
        f"    {READS[gate]}\n"
    )
    if AGENTS[agent]:
        text += (
            "nodeAgents:\n  - name: agents\n"
            "    taint: {key: example.com/agents-not-ready, effect: NoSchedule}\n"
            f"    {AGENTS[agent]}\n"
        )
    return text


@pytest.mark.parametrize("agent", list(AGENTS))
@pytest.mark.parametrize("gate", list(READS))
def test_a_chart_takes_the_rules_it_was_generated_from_whatever_they_read(
    helm: Path, gate: str, agent: str, tmp_path: Path
) -> None:
    """The guard finds what the rules read in the `rules` value (each source's fields in
    `cluster_reads.SOURCES`) as the record finds it in the rules (`cluster_reads`)."""
    text = _reading(gate, agent)
    chart = _generated(RulesDocument.parse(text, "rules.yaml"), tmp_path)
    rendered = _template(helm, _values(rules=text), tmp_path, chart)
    assert rendered.returncode == 0, rendered.stderr
