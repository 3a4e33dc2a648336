"""charts/nodegate, tested with the real helm (built from its Go module, `make helm`): it is what
`nodegate chart` generates, `helm lint --strict` passes, `helm template` renders the very objects
the manifest builder builds for the same settings (field by field), and values.schema.json makes
helm refuse a bad value, naming it. Without helm these tests fail and say why, unless the
machine has no Go at all."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from nodegate.cli.main import app
from nodegate.localcluster.build import ensure_helm_built
from nodegate.localcluster.gotool import GoError, find_go
from nodegate.manifests.build import Manifest, build_manifests
from nodegate.manifests.chart import chart_files, default_values, settings_for
from tests.unit.manifests.support import NO_POD_GATES, REPO, REPOSITORY, example_document

CHART = REPO / "charts" / "nodegate"
REGENERATE = "make chart"


@pytest.fixture(scope="module")
def helm() -> Path:
    try:
        find_go()
    except GoError as error:  # only a machine without Go may skip
        pytest.skip(f"no Go toolchain to build helm: {error}")
    try:
        return ensure_helm_built()
    except Exception as error:  # any build failure: its message is the test's failure
        pytest.fail(f"helm could not be built (make helm):\n{error}", pytrace=False)


def _run(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _template(
    helm: Path, values: dict[str, Any], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values), encoding="utf-8")
    return _run(helm, "template", "nodegate", str(CHART), "--values", str(path))


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
        if p.is_file()
    }
    assert on_disk == expected, f"charts/nodegate is stale: run `{REGENERATE}`"


def test_helm_lint_strict(helm: Path) -> None:
    linted = _run(helm, "lint", "--strict", str(CHART), "--set", f"image.repository={REPOSITORY}")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def _values(**overrides: Any) -> dict[str, Any]:
    values = default_values(example_document())
    values["image"]["repository"] = REPOSITORY
    for path, value in overrides.items():
        *parents, leaf = path.split("__")
        node = values
        for key in parents:
            node = node[key]
        node[leaf] = value
    return values


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
        image__pullPolicy="Always",
        resources={
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "2", "memory": None},
        },
        nodeSelector={"kubernetes.io/os": "linux", "pool": "system"},
    ),
    "no-namespace-no-metrics-service": _values(createNamespace=False, metrics={"service": False}),
}


@pytest.mark.parametrize("values", list(CASES.values()), ids=list(CASES))
def test_helm_template_equals_the_builder(
    helm: Path, values: dict[str, Any], tmp_path: Path
) -> None:
    rendered = _template(helm, values, tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    from_helm = sorted((d for d in yaml.safe_load_all(rendered.stdout) if d), key=_key)
    built = sorted(
        build_manifests(
            example_document(), settings_for(_coalesced(default_values(example_document()), values))
        ),
        key=_key,
    )
    assert [_key(o) for o in from_helm] == [_key(o) for o in built]
    differences = [
        found
        for b, r in zip(built, from_helm, strict=True)
        for found in _differences(b, r, "/".join(_key(b)))
    ]
    assert not differences, "helm template drifts from the builder:\n" + "\n".join(differences)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"replicas": 0}, "/replicas"),
        ({"image": {"repository": "Not/A:Repo"}}, "/image/repository"),
        ({"image": {"repository": ""}}, "/image/repository"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"namespace": "Upper_Case"}, "/namespace"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "/resources/requests/cpu"),
        ({"webhook": {}}, "webhook"),
    ],
    ids=["replicas", "repository", "no-repository", "pull-policy", "namespace", "cpu", "unknown"],
)
def test_values_schema_refuses_an_invalid_value_naming_it(
    helm: Path, change: dict[str, Any], named: str, tmp_path: Path
) -> None:
    values = copy.deepcopy(_values())
    for key, value in change.items():
        values[key] = (
            {**values[key], **value} if isinstance(value, dict) and key in values else value
        )
    rendered = _template(helm, values, tmp_path)
    assert rendered.returncode != 0, f"helm accepted {change}"
    assert "values don't meet the specifications of the schema" in rendered.stderr
    assert named in rendered.stderr, rendered.stderr


def test_schema_is_the_settings_model_cut_to_the_chart() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(default_values(example_document()))
    assert schema["properties"]["replicas"]["maximum"] == 10


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
