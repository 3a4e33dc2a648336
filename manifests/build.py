"""`build_manifests`: the reconciler's Kubernetes objects, in the order they can be applied.

Pure: settings and (optionally, with rulesSource objects) validated rules text in, a list of
plain-data objects out. The Deployment depends on the settings and, of the rules, only on the
gates' keys and effects (its pods tolerate their own gates: `nodegate.manifests.tolerations`).
With rulesSource objects (the default) nothing else depends on the rules: they are NodeRules
objects applied beside the installation, which any later rules fit (`manifests.rbac`). With
configmap, any other rules edit changes the rules ConfigMap (and, if it adds or drops init-pod
gates, the ClusterRole), the running reconciler hot-reloads it, and no pod restarts.
"""

from __future__ import annotations

from typing import Any

from nodegate.core.objects.installation import RULES_KEY
from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import NO_RULES, NodeRules
from nodegate.manifests import fencing, webhook
from nodegate.manifests.args import reconcile_argv
from nodegate.manifests.crd import noderules_crd
from nodegate.manifests.network import network_policy
from nodegate.manifests.observability import dashboard_configmap, monitors, prometheus_rule
from nodegate.manifests.rbac import cluster_rules, namespace_rules
from nodegate.manifests.settings import DeploySettings, Manifest, SettingsError
from nodegate.manifests.tolerations import pod_tolerations

RUN_AS = 65532
"""The image's non-root user and group (Dockerfile `USER 65532:65532`)."""
CONTAINER = "reconciler"


def _meta(settings: DeploySettings, name: str, *, namespaced: bool = True) -> dict[str, Any]:
    namespace = {"namespace": settings.namespace} if namespaced else {}
    return {"name": name, **namespace, "labels": settings.labels}


def reconcile_settings(settings: DeploySettings) -> dict[str, Any]:
    """What the container's `nodegate reconcile` is told, as `ReconcilerSettings` values (the
    rest stays at the reconciler's defaults); `reconcile_argv` writes them as flags."""
    source: dict[str, Any] = (
        {"rules_objects": True}
        if settings.rules_source == "objects"
        else {"rules_configmap": f"{settings.namespace}/{settings.rules_config_map}"}
    )
    values: dict[str, Any] = {
        **source,
        **settings.model_dump(include={"http_port", "log_level", "log_format"}),
        "leader_election": {
            "lease_namespace": settings.namespace,
            "lease_name": settings.leader_election.lease_name,
            **fencing.reconcile_settings(settings),
        },
    }
    served = webhook.reconcile_settings(settings)
    if served is not None:
        values["webhook"] = served
    if settings.oci is not None:  # the same fields; an empty region is the auth's own
        values["oci"] = settings.oci.model_dump(exclude=None if settings.oci.region else {"region"})
    return values


def build_manifests(document: RulesDocument | None, settings: DeploySettings) -> list[Manifest]:
    """Every object of one reconciler installation, in apply order: the NodeRules CRD first
    (cluster-wide, shared by every installation; `kubectl apply -f` of a NodeRules object needs
    it), then the Namespace. With rulesSource objects the rules are optional and not among the
    objects (`rules_object`): given, their gates are tolerated; the installation serves any
    rules (`manifests.rbac`)."""
    if document is None and settings.rules_source == "configmap":
        raise SettingsError(
            "rulesSource configmap: give the rules the ConfigMap holds, or use rulesSource objects"
        )
    rules = document.rules if document is not None else NO_RULES
    objects: list[Manifest] = [noderules_crd()]
    if settings.create_namespace:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": _meta(settings, settings.namespace, namespaced=False),
            }
        )
    objects += [
        _service_account(settings),
        *_rbac(rules, settings),
        *(
            [rules_configmap(document, settings)]
            if document and settings.rules_source == "configmap"
            else []
        ),
        deployment(settings, rules),
        _pod_disruption_budget(settings),
    ]
    if settings.metrics.service:
        objects.append(_metrics_service(settings))
    if settings.grafana_dashboard is not None:
        objects.append(dashboard_configmap(settings))
    if settings.prometheus_rule is not None:
        objects.append(prometheus_rule(settings))
    objects += monitors(settings)
    objects += network_policy(settings)
    objects += webhook.objects(settings)
    objects += fencing.objects(settings)
    return objects


def _service_account(settings: DeploySettings) -> Manifest:
    account: Manifest = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(settings, settings.name),
    }
    if settings.image.pull_secrets:
        account["imagePullSecrets"] = [{"name": s} for s in settings.image.pull_secrets]
    return account


def _rbac(rules: NodeRules, settings: DeploySettings) -> list[Manifest]:
    group = "rbac.authorization.k8s.io"
    subject = {"kind": "ServiceAccount", "name": settings.name, "namespace": settings.namespace}
    return [
        {
            "apiVersion": f"{group}/v1",
            "kind": "ClusterRole",
            "metadata": _meta(settings, settings.name, namespaced=False),
            "rules": cluster_rules(rules, settings)
            + webhook.cluster_rules(settings)
            + fencing.cluster_rules(settings),
        },
        {
            "apiVersion": f"{group}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(settings, settings.name, namespaced=False),
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": settings.name},
            "subjects": [subject],
        },
        {
            "apiVersion": f"{group}/v1",
            "kind": "Role",
            "metadata": _meta(settings, settings.name),
            "rules": namespace_rules(settings, rules) + webhook.namespace_rules(settings, rules),
        },
        {
            "apiVersion": f"{group}/v1",
            "kind": "RoleBinding",
            "metadata": _meta(settings, settings.name),
            "roleRef": {"apiGroup": group, "kind": "Role", "name": settings.name},
            "subjects": [subject],
        },
    ]


def rules_configmap(document: RulesDocument, settings: DeploySettings) -> Manifest:
    """The rules ConfigMap: exactly the validated rules text."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(settings, settings.rules_config_map),
        "data": {RULES_KEY: document.text},
    }


def rules_object(document: RulesDocument, settings: DeploySettings) -> Manifest:
    """The rules as a NodeRules object (rulesSource objects), labelled as the installation's:
    what Pulumi, Ansible and the chart apply after the installation (`build_manifests`), and
    what a kubectl user applies as the rules file itself. Named as the document names it, or
    after the installation."""
    found = document.as_object(settings.name)
    found["metadata"]["labels"] = settings.labels
    return found


def _container(settings: DeploySettings) -> dict[str, Any]:
    image = settings.image
    field = {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    return {
        "name": CONTAINER,
        "image": image.reference,
        "imagePullPolicy": image.pull_policy,
        "args": reconcile_argv(reconcile_settings(settings)),
        "env": [
            {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for name, path in field.items()
        ],
        "ports": [
            {"name": "http", "containerPort": settings.http_port, "protocol": "TCP"},
            *webhook.container_ports(settings),
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "resources": {
            "requests": dict(sorted(settings.resources.requests.items())),
            "limits": dict(sorted(settings.resources.limits.items())),
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        **({"volumeMounts": mounts} if (mounts := webhook.volumes(settings)[1]) else {}),
    }


def _topology_spread(settings: DeploySettings) -> list[dict[str, Any]]:
    """Replicas on different nodes and zones when the cluster has them; never unschedulable
    on a one-node or one-zone cluster (ScheduleAnyway)."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": settings.selector},
        }
        for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
    ]


def deployment(settings: DeploySettings, rules: NodeRules) -> Manifest:
    """The reconciler Deployment: the settings, and the rules' gates as tolerations (see the
    module doc)."""
    priority = settings.priority_class_name
    pod: dict[str, Any] = {
        "serviceAccountName": settings.name,
        **({"priorityClassName": priority} if priority is not None else {}),
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": dict(sorted(settings.node_selector.items())),
        **({"affinity": settings.affinity} if settings.affinity else {}),
        "tolerations": pod_tolerations(rules, settings),
        "topologySpreadConstraints": _topology_spread(settings),
        "terminationGracePeriodSeconds": 30,
        "containers": [_container(settings)],
        **({"volumes": volumes} if (volumes := webhook.volumes(settings)[0]) else {}),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(settings, settings.name),
        "spec": {
            "replicas": settings.replicas,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": settings.selector},
            "template": {"metadata": {"labels": settings.labels}, "spec": pod},
        },
    }


def _pod_disruption_budget(settings: DeploySettings) -> Manifest:
    """At most one replica drained at a time (works for any replica count, even 1)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(settings, settings.name),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": settings.selector}},
    }


def _metrics_service(settings: DeploySettings) -> Manifest:
    meta = _meta(settings, f"{settings.name}-metrics")
    if settings.metrics.annotate_for_scraping:
        meta["annotations"] = {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(settings.http_port),
            "prometheus.io/path": "/metrics",
        }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": settings.selector,
            "ports": [{"name": "http-metrics", "port": settings.http_port, "targetPort": "http"}],
        },
    }
