"""The chart's values: nodegate's deploy settings (`DeploySettings`) in the chart's shape, and
nodegate's table of what the template generator varies (`TABLE`, read by
nodegate.manifests.chart.inference).

The values are the deploy settings, one declaration each: the same keys, defaults and checks,
with the chart conventions `enabled: false` for an optional section and `""` for an unset
optional value (`settings_for` maps them back).

* **Release.** A setting may fall back to something only helm knows (`Scalar.fallback`): the
  `namespace` value is `""` by default and means the release namespace (`helm install -n`),
  `(.Values.namespace | default .Release.Namespace)` wherever the builder writes the namespace,
  as every mainstream chart does. The chart never makes the release namespace itself (helm
  keeps the release in it, so it exists, or `--create-namespace` makes it): its Namespace object
  is rendered for `createNamespace` and an explicit `namespace` other than the release's only.
  `release_settings` is what a release of some values in some namespace stands for.

`values.schema.json` is the model's JSON Schema in that shape (a fallback setting may be `""`),
plus the rules' own schema (docs/rules.schema.json) for a structured `rules` value, so helm
refuses a bad setting or a structurally invalid rules file, naming it.
"""

from __future__ import annotations

import copy
import json
import types
import typing
from typing import Any

import yaml
from pydantic import BaseModel

from nodegate.core.rules.rules_object import rules_file_json_schema
from nodegate.manifests.chart.inference import (
    Scalar,
    Subtree,
    Table,
    Variant,
    dropped,
    get_value,
    given,
    set_value,
    switch,
)
from nodegate.manifests.settings import DIGEST_RE, REPOSITORY_RE, TAG_RE, DeploySettings
from nodegate.manifests.version import package_version

EXAMPLE_REPOSITORY = "registry.example.com/nodegate"


# --- values: the deploy settings in the chart's shape -----------------------------------------


def _optional_model(annotation: Any) -> type[BaseModel] | None:
    """X when the field is `X | None` with X a settings model (a switchable section)."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    arguments = typing.get_args(annotation)
    members = [a for a in arguments if a is not type(None)]
    if len(members) == 1 and type(None) in arguments and _model(members[0]) is not None:
        return _model(members[0])
    return None


def _optional_scalar(annotation: Any) -> bool:
    """Whether the field is `str | None` (an optional value: `""` in the chart)."""
    args = typing.get_args(annotation)
    return type(None) in args and _optional_model(annotation) is None


def _model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _alias(model: type[BaseModel], name: str) -> str:
    return model.model_fields[name].alias or name


def _section_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """A section's values with nothing given: its defaults, `""` for a required value."""
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = _alias(model, name)
        if (section := _optional_model(info.annotation)) is not None:
            values[key] = {"enabled": False, **_section_defaults(section)}
        elif info.is_required():
            sub = _model(info.annotation)
            values[key] = _section_defaults(sub) if sub else ""
        else:
            default = info.get_default(call_default_factory=True)
            if isinstance(default, BaseModel):
                values[key] = _section_defaults(type(default))
            elif default is None:
                values[key] = ""
            else:
                values[key] = json.loads(json.dumps(_plain(default)))
    return values


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def builder_values() -> dict[str, Any]:
    """Every deploy setting at the builder's default, in the chart's shape."""
    values = _section_defaults(DeploySettings)
    values["image"]["tag"] = package_version()
    values["rules"] = None
    return values


def default_values() -> dict[str, Any]:
    """values.yaml: every deploy setting at its default, the image tag this nodegate's version,
    `""` for a setting that falls back to the release (`namespace`: the release namespace), and
    no rules (they are the cluster's own: `--set-file rules=rules.yaml` or a `rules` map)."""
    values = builder_values()
    for scalar in SCALARS:
        if scalar.fallback is not None:
            set_value(values, scalar.path, "")
    return values


def _to_settings(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = _alias(model, name)
        if key not in values:
            continue
        value = values[key]
        if (section := _optional_model(info.annotation)) is not None:
            if isinstance(value, dict) and value.get("enabled"):
                rest = {k: v for k, v in value.items() if k != "enabled"}
                data[key] = _to_settings(section, rest)
            else:
                data[key] = None
        elif (sub := _model(info.annotation)) is not None and isinstance(value, dict):
            data[key] = _to_settings(sub, value)
        elif value == "" and _optional_scalar(info.annotation):
            data[key] = None
        else:
            data[key] = value
    return data


def settings_for(values: dict[str, Any]) -> DeploySettings:
    """The deploy settings a set of chart values stands for (the rules aside), every setting
    given (see `release_settings` for values that fall back to the release)."""
    data = {k: v for k, v in values.items() if k != "rules"}
    return DeploySettings.model_validate(_to_settings(DeploySettings, data))


def release_settings(values: dict[str, Any], release_namespace: str) -> DeploySettings:
    """The deploy settings a helm release of these values in `release_namespace` stands for:
    an empty `namespace` is the release namespace, and the chart never makes the release
    namespace (helm stores the release there, so it exists already)."""
    resolved = copy.deepcopy(values)
    known = {RELEASE_NAMESPACE: release_namespace}
    for scalar in SCALARS:
        if scalar.fallback is not None and get_value(resolved, scalar.path) in ("", None):
            set_value(resolved, scalar.path, known[scalar.fallback])
    if resolved["namespace"] == release_namespace:
        resolved["createNamespace"] = False
    return settings_for(resolved)


def rules_text(values: dict[str, Any]) -> str:
    """The rules ConfigMap's text for a `rules` value as the chart writes it: a string as is,
    a map as helm's `toYaml` writes it (for the builder, only its content matters)."""
    rules = values["rules"]
    return rules if isinstance(rules, str) else yaml.safe_dump(rules, sort_keys=True)


def value_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Every leaf path of a values tree (a map setting, such as `resources`, is one leaf)."""
    paths: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in MAP_SETTINGS:
            paths += value_paths(value, f"{path}.")
        else:
            paths.append(path)
    return paths


# --- what the generator varies ------------------------------------------------------------------


RELEASE_NAMESPACE = ".Release.Namespace"

DIGEST_SENTINEL = "sha256:" + "e" * 64
SCALARS = (
    Scalar(
        "namespace",
        "zq-namespace",
        fallback=RELEASE_NAMESPACE,
        note='In the chart, `""` (the default) is the release namespace '
        "(`helm install -n <namespace>`, with `--create-namespace` if it does not exist yet).",
        in_strings=True,
    ),
    Scalar("name", "zq-name", in_strings=True),
    Scalar("rulesConfigMap", "zq-rules-cm", in_strings=True),
    Scalar("replicas", 9),
    Scalar("image.repository", "zq.example/zq-repository", in_strings=True),
    Scalar("image.tag", "zq-tag", in_strings=True),
    Scalar("image.digest", DIGEST_SENTINEL, in_strings=True),
    Scalar("image.pullPolicy", "Always"),
    Scalar("priorityClassName", "zq-priority", in_strings=True),
    Scalar("httpPort", 18089, in_strings=True),
    # Enums found inside strings (`--log-level=debug`), as `oci.auth`: no other leaf that the
    # sentinel build changes holds "debug" or "text" (the chart tests would fail if one did).
    Scalar("logLevel", "debug", in_strings=True),
    Scalar("logFormat", "text", in_strings=True),
    Scalar("leaderElection.leaseName", "zq-lease", in_strings=True),
    Scalar("serviceMonitor.interval", "17s"),
    Scalar("podMonitor.interval", "19s"),
    Scalar("grafanaDashboard.namespace", "zq-dashboards", in_strings=True),
    Scalar("webhook.port", 19443, in_strings=True),
    Scalar("webhook.failurePolicy", "Fail"),
    Scalar("webhook.timeoutSeconds", 29),
    Scalar("webhook.reinvocationPolicy", "Never"),
    Scalar("webhook.certManager.name", "zq-issuer", in_strings=True),
    Scalar("webhook.certManager.kind", "ClusterIssuer"),
    Scalar("oci.compartments", "zq-compartments", in_strings=True),
    Scalar("oci.region", "zq-region", in_strings=True),
    Scalar("oci.auth", "instance_principal", in_strings=True),
    Scalar("oci.pollSeconds", 17, in_strings=True),
)
"""The scalar settings. A "zq" sentinel, a digest or a port number is also found inside
longer strings (`in_strings`); an enum or small number only as a whole leaf."""


def _tolerations_as_built(tolerations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tolerations as the builder writes them: no empty fields, the operator always."""
    return [
        {k: v for k, v in t.items() if v is not None} | {"operator": t["operator"]}
        for t in tolerations
    ]


SUBTREES = (
    Subtree(
        "resources",
        "copy",
        {"requests": {"cpu": "3m"}, "limits": {"memory": "5Mi"}},
        {"requests": {"cpu": "7m"}, "limits": {}},
    ),
    Subtree("nodeSelector", "copy", {"zq.d/node": "d"}, {"zq.s/node": "s"}),
    Subtree("affinity", "copy", {"zq.d/affinity": "d"}, {"zq.s/affinity": "s"}, optional=True),
    Subtree(
        "tolerations",
        "splice",
        [{"key": "zq.d/toleration", "operator": "Exists"}],
        [{"key": "zq.s/toleration", "operator": "Exists", "effect": "NoExecute"}],
        as_built=_tolerations_as_built,
    ),
    Subtree("image.pullSecrets", "map", ["zq-d-secret"], ["zq-s-secret"], optional=True),
    Subtree("networkPolicy.apiServerPorts", "map", [1443], [17443]),
    Subtree("grafanaDashboard.labels", "merge", {"zq.d/dash": "d"}, {"zq.s/dash": "s"}),
    Subtree("prometheusRule.labels", "merge", {"zq.d/rule": "d"}, {"zq.s/rule": "s"}),
    Subtree("serviceMonitor.labels", "merge", {"zq.d/sm": "d"}, {"zq.s/sm": "s"}),
    Subtree("podMonitor.labels", "merge", {"zq.d/pm": "d"}, {"zq.s/pm": "s"}),
)
MAP_SETTINGS = {s.path for s in SUBTREES}

NAMESPACE = next(s for s in SCALARS if s.path == "namespace").expression
"""The namespace the objects go to: the `namespace` value, or the release's."""
MAKES_NAMESPACE = f"and .Values.createNamespace (ne {NAMESPACE} {RELEASE_NAMESPACE})"
"""When the chart makes the Namespace: asked to, and not the release's own (which exists: helm
keeps the release in it; making it again would make helm refuse the install)."""
CREATE_NAMESPACE_NOTE = (
    "In the chart: only a `namespace` other than the release's is made (the release namespace "
    "exists, or helm's `--create-namespace` makes it)."
)

RULES_OBJECTS = 'eq .Values.rulesSource "objects"'
"""When the reconciler reads NodeRules objects (`rulesSource: objects`): the chart renders the
`rules` value as a NodeRules object, not as the rules ConfigMap."""

VARIANTS = (
    Variant(
        "createNamespace", {"createNamespace": False}, f"not ({MAKES_NAMESPACE})", MAKES_NAMESPACE
    ),
    dropped("metrics.service", False),
    dropped("metrics.annotateForScraping", False),
    dropped("priorityClassName", ""),
    dropped("leaderElection.serverFence", False),
    given("image.digest", "sha256:" + "d" * 64),
    given("image.pullSecrets", ["zq-d-secret"]),
    given("affinity", {"zq.d/affinity": "d"}),
    switch("webhook"),
    switch("webhook.certManager", {"webhook.certManager.name": "d-issuer"}),
    switch("prometheusRule"),
    switch("grafanaDashboard"),
    given("grafanaDashboard.namespace", "d-dashboards"),
    switch("serviceMonitor"),
    switch("podMonitor"),
    switch("networkPolicy"),
    switch("oci", {"oci.compartments": "d-compartment"}),
    given("oci.region", "zq-d-region"),
    Variant("rulesSource", {"rulesSource": "objects"}, RULES_OBJECTS, f"not ({RULES_OBJECTS})"),
)

TABLE = Table(SCALARS, SUBTREES, VARIANTS)
"""nodegate's table: what the chart's templates are inferred over."""


# --- values.schema.json -------------------------------------------------------------------------

CROSS_CHECKS = [
    {
        "if": {"properties": {"serviceMonitor": {"properties": {"enabled": {"const": True}}}}},
        "then": {"properties": {"metrics": {"properties": {"service": {"const": True}}}}},
    },
    {
        "if": {"properties": {"oci": {"properties": {"enabled": {"const": True}}}}},
        "then": {"properties": {"oci": {"properties": {"compartments": {"minLength": 1}}}}},
    },
]
"""DeploySettings' checks across fields, as JSON Schema: a ServiceMonitor needs the metrics
Service (`DeploySettings._monitors`); OCI conditions need a compartment
(`OciDeploy._some_compartment`)."""


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return copy.deepcopy(defs[ref.rsplit("/", 1)[1]]) if ref else copy.deepcopy(schema)


def _or_empty(schema: dict[str, Any]) -> dict[str, Any]:
    """A value that may also be `""` (the chart's "not set"); its description kept outside."""
    inner = {k: v for k, v in schema.items() if k != "description"}
    described = {"description": schema["description"]} if "description" in schema else {}
    return {"anyOf": [inner, {"const": ""}], **described}


def _chart_schema(model: type[BaseModel], schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A settings model's JSON Schema in the chart's shape (see `default_values`)."""
    schema = _resolve(schema, defs)
    properties: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = _alias(model, name)
        child = schema["properties"][key]
        if (section := _optional_model(info.annotation)) is not None:
            branch = next(b for b in child["anyOf"] if "$ref" in b)
            converted = _chart_schema(section, branch, defs)
            required = converted.pop("required", [])
            for field_name in required:
                converted["properties"][field_name] = _or_empty(converted["properties"][field_name])
            summary = child.get("description", "").split(";")[0].split(" (")[0].rstrip(".")
            converted["properties"] = {
                "enabled": {"type": "boolean", "description": f"Switch on: {summary}."},
                **converted["properties"],
            }
            converted["if"] = {"properties": {"enabled": {"const": True}}}
            converted["then"] = {
                "properties": {
                    f: _resolve(_chart_schema_leaf(section, f, defs), defs) for f in required
                }
            }
            if not required:
                converted.pop("if")
                converted.pop("then")
            properties[key] = {**converted, "description": child.get("description", "")}
        elif (sub := _model(info.annotation)) is not None:
            properties[key] = _chart_schema(sub, child, defs)
            if "description" in child:
                properties[key]["description"] = child["description"]
        elif _optional_scalar(info.annotation) and "anyOf" in child:
            branch = next(b for b in child["anyOf"] if b.get("type") != "null")
            properties[key] = {**_or_empty(_resolve(branch, defs))}
            if "description" in child:
                properties[key]["description"] = child["description"]
        else:
            properties[key] = _strip(_resolve(child, defs), defs)
    converted = {k: v for k, v in schema.items() if k not in ("title", "properties")}
    converted["properties"] = properties
    converted["additionalProperties"] = False
    return _strip(converted, defs)


def _chart_schema_leaf(model: type[BaseModel], key: str, defs: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    leaf: dict[str, Any] = _strip(
        _resolve(schema["properties"][key], schema.get("$defs", defs)), defs
    )
    return leaf


def _strip(schema: Any, defs: dict[str, Any]) -> Any:
    """Inline the settings' own references and drop titles and defaults (values.yaml has the
    defaults; a `default` in a schema is only an annotation)."""
    if isinstance(schema, dict):
        if "$ref" in schema and schema["$ref"].startswith("#/$defs/"):
            return _strip(_resolve(schema, defs), defs)
        return {k: _strip(v, defs) for k, v in schema.items() if k not in ("title", "default")}
    if isinstance(schema, list):
        return [_strip(v, defs) for v in schema]
    return schema


def _rules_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The rules' JSON Schema (`nodegate schema`) with its definitions renamed `rules.<name>`,
    to sit under the values schema's `$defs`."""
    schema = rules_file_json_schema()
    text = json.dumps(schema).replace('"#/$defs/', '"#/$defs/rules.')
    renamed = json.loads(text)
    defs = {f"rules.{k}": v for k, v in renamed.pop("$defs", {}).items()}
    renamed.pop("$schema", None)
    return renamed, defs


def values_schema() -> dict[str, Any]:
    """values.schema.json: DeploySettings' JSON Schema in the chart's shape, and the rules: the
    rules file's text (checked by the reconciler and `nodegate validate`) or the rules as a map,
    which helm checks against the rules' own schema."""
    full = DeploySettings.model_json_schema(by_alias=True)
    defs = full.get("$defs", {})
    schema = _chart_schema(DeploySettings, full, defs)
    image = schema["properties"]["image"]["properties"]
    image["repository"] = {
        "type": "string",
        "pattern": REPOSITORY_RE.pattern,
        "description": image["repository"].get("description", ""),
    }
    image["tag"] = {
        "type": "string",
        "pattern": TAG_RE.pattern.replace(r"\w", "A-Za-z0-9_"),
        "description": image["tag"].get("description", ""),
    }
    image["digest"] = {
        **_or_empty({"type": "string", "pattern": DIGEST_RE.pattern}),
        "description": image["digest"].get("description", ""),
    }
    for scalar in SCALARS:
        if scalar.fallback is not None:
            *parents, leaf = scalar.path.split(".")
            properties = schema
            for key in parents:
                properties = properties["properties"][key]
            value = properties["properties"][leaf]
            value["description"] = f"{value.get('description', '')} {scalar.note}".strip()
            properties["properties"][leaf] = _or_empty(value)
    create = schema["properties"]["createNamespace"]
    create["description"] = f"{create.get('description', '')} {CREATE_NAMESPACE_NOTE}".strip()
    toleration = schema["properties"]["tolerations"]["items"]
    toleration["required"] = ["operator"]  # the builder writes it; helm must see it given
    rules, rules_defs = _rules_schema()
    schema["properties"]["rules"] = {
        "description": "The NodeRules: the rules file's text (`--set-file rules=rules.yaml`) "
        "or the rules as a map, which helm checks against the rules' schema. Helm reads a map "
        "as YAML 1.1 and turns unquoted keys into other text before the schema sees them "
        "(`on:` becomes 'true', `1e3:` '1000', `012:` '10'): quote such label keys in a map, "
        "or give the text, which nodegate reads itself.",
        "if": {"type": "string"},
        "then": {"minLength": 1},
        "else": rules,
    }
    schema["required"] = ["image", "rules"]
    schema["allOf"] = CROSS_CHECKS
    body = {k: v for k, v in schema.items() if k not in ("$defs", "description")}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "nodegate chart values",
        "description": full.get("description", ""),
        **body,
        "$defs": rules_defs,
    }
