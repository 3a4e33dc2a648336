"""`Reconciler`: nodegate's in-cluster reconciler, deployed by `pulumi up` from the one builder.

The objects are exactly what `nodegate.manifests.build.build_manifests` returns (the same function
behind `nodegate manifests` and `deploy/reconciler.yaml`), and, with the deploy setting
`rulesSource: objects` (the default), the rules as the NodeRules object
`nodegate.manifests.build.rules_object` makes; this component only declares them, one Pulumi
resource per object, all children of the component, on a Kubernetes provider for the cluster
the reconciler runs in.

Where the rules go follows `rulesSource`. configmap (an installation from before NodeRules
objects): the rules ConfigMap holds the rules text; the provider treats ConfigMaps as mutable,
so a rules edit updates it in place (the reconciler hot-reloads it) instead of replacing it.
objects (the default): there is no rules ConfigMap; the rules are the NodeRules object, which
depends on the NodeRules CRD (so the API server knows the kind before the object is applied),
and a rules edit updates it in place (the reconciler watches it). The Deployment does not
depend on that object: its pods start without it (no NodeRules object is no rules, and the
reconciler is ready), and it is applied beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import CRD_NAME
from nodegate.infra.cloud_inputs import sha256_hex, stack_owned
from nodegate.manifests.build import build_manifests, rules_object
from nodegate.manifests.settings import DeploySettings, Manifest

TYPE_TOKEN = "nodegate:index:Reconciler"

_RESOURCES: dict[str, tuple[ModuleType, tuple[str, ...]]] = {
    "apiextensions.k8s.io/v1": (k8s.apiextensions.v1, ("CustomResourceDefinition",)),
    "v1": (k8s.core.v1, ("Namespace", "ServiceAccount", "ConfigMap", "Service", "Secret")),
    "admissionregistration.k8s.io/v1": (
        k8s.admissionregistration.v1,
        (
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ),
    ),
    "rbac.authorization.k8s.io/v1": (
        k8s.rbac.v1,
        ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"),
    ),
    "apps/v1": (k8s.apps.v1, ("Deployment",)),
    "policy/v1": (k8s.policy.v1, ("PodDisruptionBudget",)),
    "networking.k8s.io/v1": (k8s.networking.v1, ("NetworkPolicy",)),
}
"""By apiVersion: the Pulumi module and the kinds the builder makes of it (each module's class
of a kind is named after it); custom resources (the PrometheusRule, ServiceMonitor, PodMonitor,
cert-manager's Certificate, nodegate's own NodeRules) go through `apiextensions.CustomResource`."""

_CUSTOM = {
    ("nodegate.dev/v1", "NodeRules"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("cert-manager.io/v1", "Certificate"),
}

_ACCESS = ("ClusterRoleBinding", "RoleBinding", "ConfigMap", "ServiceAccount", "Secret")
"""The kinds the Deployment depends on: its pods start with their permissions and rules."""

_ARGUMENT = {"roleRef": "role_ref", "imagePullSecrets": "image_pull_secrets"}
"""Top-level fields whose Python keyword differs from the field name."""


@dataclass(frozen=True, kw_only=True)
class ReconcilerArgs:
    """Inputs of the reconciler deployment: the rules it enforces and how it is deployed."""

    rules: RulesDocument
    """The validated rules: their exact text goes into the rules ConfigMap (rulesSource
    configmap), or their spec into a NodeRules object (rulesSource objects)."""
    settings: DeploySettings
    """Namespace, image, replicas, resources, monitoring (`nodegate:reconciler` in the stack)."""
    kubeconfig: pulumi.Input[str] | None = None
    """Kubeconfig of the cluster (its contents or a file path); None: the ambient one
    (KUBECONFIG or ~/.kube/config). Ignored when `provider` is given."""
    context: pulumi.Input[str] | None = None
    """Kubeconfig context to use; None: the kubeconfig's current context."""
    provider: k8s.Provider | None = None
    """A Kubernetes provider of your own (it should set enable_config_map_mutable=True, or a
    rules edit replaces the rules ConfigMap instead of updating it)."""


def _resource_name(component: str, obj: Manifest) -> str:
    return f"{component}-{obj['kind'].lower()}-{obj['metadata']['name']}"


def _declare(name: str, obj: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    key = (obj["apiVersion"], obj["kind"])
    if key in _CUSTOM:
        return k8s.apiextensions.CustomResource(
            name,
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            metadata=stack_owned(obj["metadata"]),
            spec=obj["spec"],
            opts=opts,
        )
    module, kinds = _RESOURCES.get(obj["apiVersion"], (None, ()))
    if obj["kind"] not in kinds:
        raise ValueError(f"no Pulumi resource for {key[0]} {key[1]}: add it to _RESOURCES")
    fields = {
        _ARGUMENT.get(field, field): value
        for field, value in obj.items()
        if field not in ("apiVersion", "kind", "metadata")
    }
    fields["metadata"] = stack_owned(obj["metadata"])
    resource: pulumi.CustomResource = getattr(module, obj["kind"])(name, opts=opts, **fields)
    return resource


class Reconciler(pulumi.ComponentResource):
    """nodegate's reconciler in one cluster: RBAC, the rules (a ConfigMap or a NodeRules
    object), Deployment, and friends."""

    resources: dict[str, pulumi.CustomResource]
    """Every declared object, by `Kind/name`."""
    namespace: pulumi.Output[str]
    image: pulumi.Output[str]
    """The image reference the Deployment runs."""
    rules_sha256: pulumi.Output[str]
    """SHA-256 of the rules text (the rules ConfigMap's, or that the NodeRules object was made
    from), to see which rules a cluster runs."""
    cluster_rules: pulumi.Output[list[dict[str, Any]]]
    """The ClusterRole's rules (what the reconciler may do cluster-wide)."""

    def __init__(
        self, name: str, args: ReconcilerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        objects = build_manifests(args.rules, args.settings)  # pure: raises before declaring
        super().__init__(TYPE_TOKEN, name, None, opts)
        provider = args.provider or k8s.Provider(
            f"{name}-provider",
            kubeconfig=args.kubeconfig,
            context=args.context,
            enable_config_map_mutable=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.resources = {}
        namespace: pulumi.CustomResource | None = None
        access: list[pulumi.Resource] = []
        for obj in objects:
            kind = obj["kind"]
            depends: list[pulumi.Resource] = []
            if namespace is not None and "namespace" in obj["metadata"]:
                depends.append(namespace)
            if kind == "Deployment":
                depends += access
            resource = _declare(
                _resource_name(name, obj),
                obj,
                pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends),
            )
            self.resources[f"{kind}/{obj['metadata']['name']}"] = resource
            if kind == "Namespace":
                namespace = resource
            elif kind in _ACCESS:
                access.append(resource)

        if args.settings.rules_source == "objects":
            # On the CRD only, not the Deployment (the module docstring says why).
            rules = rules_object(args.rules, args.settings)
            crd = self.resources[f"CustomResourceDefinition/{CRD_NAME}"]
            self.resources[f"NodeRules/{rules['metadata']['name']}"] = _declare(
                _resource_name(name, rules),
                rules,
                pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[crd]),
            )

        role = next(o for o in objects if o["kind"] == "ClusterRole")
        self.namespace = pulumi.Output.from_input(args.settings.namespace)
        self.image = pulumi.Output.from_input(args.settings.image.reference)
        self.rules_sha256 = pulumi.Output.from_input(sha256_hex(args.rules.text))
        self.cluster_rules = pulumi.Output.from_input(role["rules"])
        self.register_outputs(
            {
                "namespace": self.namespace,
                "image": self.image,
                "rulesSha256": self.rules_sha256,
                "clusterRules": self.cluster_rules,
            }
        )
