"""How the reconciler is deployed: one typed, documented settings model for every consumer.

The same model is the `nodegate:reconciler` section of a Pulumi stack (camelCase keys, unknown
keys refused with a did-you-mean), what `nodegate manifests` builds from its flags, and what
`deploy/reconciler.yaml` is generated with. Defaults are the recommended deployment; only the
image repository has none, because no default image is pullable by a cloud node.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP
from nodegate.core.objects.installation import LogFormat, LogLevel
from nodegate.core.objects.sightings_record import SIGHTINGS_CONFIGMAP
from nodegate.core.objects.status_record import STATUS_CONFIGMAP
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.core.text.frozen import Frozen, LabelKey, LabelValue
from nodegate.core.text.k8s_names import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN
from nodegate.defaults.names import (
    DEFAULT_LEASE,
    DEFAULT_NAME,
    DEFAULT_NAMESPACE,
    DEFAULT_RULES_CONFIGMAP,
)
from nodegate.manifests.version import package_version

Manifest = dict[str, Any]
"""One Kubernetes object as plain data (apiVersion, kind, metadata, …)."""
PolicyRule = dict[str, Any]
"""A Kubernetes rbac.authorization.k8s.io/v1 PolicyRule as plain data."""

# The image reference grammar of the OCI distribution spec (distribution/reference): a
# registry host with an optional port, then lower-case path components.
_HOST_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST = rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
REPOSITORY_RE = re.compile(rf"^(?:{_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")
TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
QUANTITY_RE = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$"

DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]
NAME_MAX = 63 - len("-metrics")
"""An installation's name leaves room for its longest suffixed Service name."""
DnsSubdomain = Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)]
Quantity = Annotated[str, Field(pattern=QUANTITY_RE)]


def _check_repository(value: str) -> str:
    if "@" in value or ":" in value.rpartition("/")[2]:
        raise ValueError(
            f"'{value}' carries a tag or digest; give the repository alone (e.g. "
            "'iad.ocir.io/mytenancy/nodegate') and the tag or digest as image.tag / image.digest"
        )
    if not REPOSITORY_RE.match(value):
        raise ValueError(
            f"'{value}' is not an image repository: registry host, then lower-case path "
            "components, e.g. 'iad.ocir.io/mytenancy/nodegate' or 'myacr.azurecr.io/nodegate'"
        )
    return value


def _check_tag(value: str) -> str:
    if not TAG_RE.match(value):
        raise ValueError(
            f"'{value}' is not an image tag: letters, digits, '_', '.', '-', at most 128, "
            "not starting with '.' or '-'"
        )
    return value


def _check_digest(value: str) -> str:
    if not DIGEST_RE.match(value):
        raise ValueError(f"'{value}' is not an image digest: 'sha256:' then 64 hex digits")
    return value


class Documented(Frozen):
    """A settings model whose attribute docstrings are its fields' descriptions in its JSON
    Schema (values.schema.json and the chart's values table show them)."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class ImageSettings(Documented):
    """The reconciler's container image: built from the repository's Dockerfile, pushed by you."""

    repository: Annotated[str, AfterValidator(_check_repository)]
    """Where you pushed the image, without tag, e.g. 'iad.ocir.io/<tenancy-namespace>/nodegate'
    (OCIR) or '<registry>.azurecr.io/nodegate' (ACR). Required: there is no public image."""
    tag: Annotated[str, AfterValidator(_check_tag)] | None = None
    """Image tag; default: this nodegate's package version (the tag `make image` builds)."""
    digest: Annotated[str, AfterValidator(_check_digest)] | None = None
    """Pin to a digest ('sha256:…'); with a digest and no tag the tag is left out."""
    pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    """Kubernetes imagePullPolicy."""
    pull_secrets: tuple[DnsSubdomain, ...] = ()
    """Names of docker-registry Secrets in the reconciler's namespace, for a private registry
    (nodes of OKE/AKS clusters with registry access configured need none)."""

    @property
    def reference(self) -> str:
        """The full image reference the Deployment runs."""
        pinned = self.tag is not None or self.digest is not None
        tag = self.tag if pinned else package_version()
        digest = f"@{self.digest}" if self.digest else ""
        return self.repository + (f":{tag}" if tag else "") + digest


ResourceName = Literal["cpu", "memory"]


def _default_requests() -> dict[ResourceName, str]:
    return {"cpu": "50m", "memory": "96Mi"}


def _default_limits() -> dict[ResourceName, str]:
    return {"memory": "256Mi"}


class ResourceSettings(Documented):
    """CPU and memory of the reconciler container (Kubernetes quantities)."""

    requests: dict[ResourceName, Quantity] = Field(default_factory=_default_requests)
    """Guaranteed share; the defaults fit a few thousand nodes (see docs/reconciler.md)."""
    limits: dict[ResourceName, Quantity] = Field(default_factory=_default_limits)
    """Hard caps; no CPU limit by default, so a relist is never throttled."""


class Toleration(Documented):
    """A Kubernetes toleration of the reconciler's pods."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, ge=0)


class LeaderElectionDeploy(Documented):
    """The coordination.k8s.io Lease the replicas compete for, in the reconciler's namespace
    (deploy side: what the manifests name; the reconciler's own Lease timing is
    `nodegate.reconciler.settings.LeaderElectionSettings`)."""

    lease_name: DnsSubdomain = DEFAULT_LEASE
    """Name of the Lease; the Role may get and update this one Lease only."""
    server_fence: bool = True
    """Ship the fence policy (a ValidatingAdmissionPolicy and its binding, named
    `<name>-fence`): the API server refuses a write by the reconciler made under a term of
    leadership that is over, such as a paused old leader's. Needs admissionregistration.k8s.io/v1
    ValidatingAdmissionPolicy (Kubernetes 1.30 or later); off: writes are fenced on the client
    only (docs/reconciler.md, "One writer")."""


class MetricsSettings(Documented):
    """The metrics Service in front of the replicas' /metrics."""

    service: bool = True
    """Create a ClusterIP Service named '<name>-metrics' for Prometheus to scrape."""
    annotate_for_scraping: bool = True
    """Add the common prometheus.io/scrape, /port, /path annotations to that Service."""


class DashboardSettings(Documented):
    """A ConfigMap holding nodegate's Grafana dashboard, for Grafana's dashboard sidecar."""

    labels: dict[LabelKey, LabelValue] = Field(default_factory=lambda: {"grafana_dashboard": "1"})
    """Labels the sidecar selects dashboards by (kube-prometheus-stack's default shown)."""
    namespace: DnsLabel | None = None
    """Namespace of the ConfigMap; default: the reconciler's (the sidecar must watch it)."""


class PrometheusRuleSettings(Documented):
    """A PrometheusRule (Prometheus Operator CRD) with nodegate's alerts."""

    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Labels the Prometheus ruleSelector matches, e.g. {release: kube-prometheus-stack}."""


DURATION_RE = r"^[0-9]+(ms|s|m|h)$"
Duration = Annotated[str, Field(pattern=DURATION_RE)]


class MonitorSettings(Documented):
    """A Prometheus Operator ServiceMonitor or PodMonitor for the replicas' /metrics."""

    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Labels the Prometheus serviceMonitorSelector / podMonitorSelector matches, e.g.
    {release: kube-prometheus-stack}."""
    interval: Duration = "30s"
    """Scrape interval (Prometheus duration)."""


class NetworkPolicySettings(Documented):
    """A NetworkPolicy around the replicas: in, only their http port (metrics, probes) and the
    webhook's; out, only the API server."""

    api_server_ports: tuple[Annotated[int, Field(ge=1, le=65535)], ...] = Field(
        default=(443, 6443), min_length=1
    )
    """TCP ports the pods may connect to, to any address: the API server's endpoint ports
    (CNIs enforce egress after the Service address is translated, so the endpoint's port
    counts: 6443 on OKE and kubeadm, 443 on AKS). No DNS: the in-cluster client dials the
    API server's IP."""


class CertManagerIssuer(Documented):
    """The cert-manager issuer that signs the webhook's serving certificate."""

    name: DnsSubdomain
    """Name of the Issuer or ClusterIssuer (required)."""
    kind: Literal["Issuer", "ClusterIssuer"] = "Issuer"
    """An Issuer must be in the reconciler's namespace."""


class WebhookDeploy(Documented):
    """The optional Node admission webhook: nodes that no nodegate bootstrap made (AKS pools
    without nodeInitializationTaints, autoscaler-made or self-managed nodes) are still born
    with their startup gates and persisted labels. See docs/reconciler.md. Deploy side: the
    objects around the webhook; the server is `nodegate.reconciler.settings.WebhookSettings`."""

    port: int = Field(default=9443, ge=1, le=65535)
    """Container port of the webhook's HTTPS server (the Service listens on 443)."""
    failure_policy: Literal["Ignore", "Fail"] = "Ignore"
    """Ignore: a webhook outage never stops nodes from registering (they are born ungated).
    Fail: no node can register while no replica answers; read docs/reconciler.md first."""
    timeout_seconds: int = Field(default=2, ge=1, le=30)
    """How long the API server waits for an answer before applying the failure policy."""
    reinvocation_policy: Literal["Never", "IfNeeded"] = "IfNeeded"
    """IfNeeded: called again if a later mutating webhook changed the node (e.g. added the
    labels a gate matches); the patch is idempotent, so a second call only fills gaps."""
    cert_manager: CertManagerIssuer | None = None
    """cert-manager issues the serving certificate and injects the caBundle (no Secret access
    for the reconciler). Unset: nodegate makes and rotates its own CA and certificate, shared by
    the replicas through one Secret."""


class OciDeploy(Documented):
    """OCI instance state as node conditions (docs/reconciler.md, "OCI instance events"): the
    leader lists these compartments' instances and writes `OCIInstanceTerminating`,
    `OCIMaintenanceRebootDue` and `OCIInstanceStopped` on their Nodes. Turning it on grants
    `patch` on `nodes/status`, and, with the NetworkPolicy, DNS and HTTPS egress."""

    compartments: str = Field(default="", pattern=r"^([^,\s]+(,[^,\s]+)*)?$")
    """Compartment OCIDs whose instances are listed (one ListInstances batch each per poll),
    comma-separated; at least one when OCI conditions are on."""
    auth: Literal["workload_identity", "instance_principal"] = "workload_identity"
    """How the pods sign their calls: OKE workload identity (the pods' service account; the
    IAM policy names it) or instance principals (the nodes' dynamic group). An API key file is
    for running `nodegate reconcile` outside the cluster."""
    region: str = ""
    """Region of the Compute endpoint; empty: the auth's own (the cluster's region)."""
    poll_seconds: int = Field(default=30, ge=1)
    """Pause between two polls of every compartment, in seconds."""

    @model_validator(mode="after")
    def _some_compartment(self) -> OciDeploy:
        if not self.compartments:
            raise ValueError("oci.compartments: name at least one compartment OCID")
        return self


class SettingsError(ValueError):
    """The settings cannot serve the rules given with them (the message says the fix)."""


class AccessSettings(Documented):
    """What the reconciler may read besides Nodes, Events and its own namespace's records. Each
    unset: what the rules need. With rulesSource configmap the rules are known when the
    manifests are built, so only what they read is granted; with objects any team may apply
    rules that read anything, so each is granted. true grants it whatever the rules; false
    withholds it (refused when the rules given to the manifests need it; rules applied later
    that need it wait, and their NodeRules object's status says so: Degraded, CannotRead)."""

    pods: bool | None = None
    """list/watch Pods in every namespace: startup gates that wait for init pods
    (`readyWhen.pods`) or backfill, and node agents. Costs the reconciler a watch of every
    Pod (docs/reconciler.md, "What access costs")."""
    daemon_sets: bool | None = None
    """list/watch DaemonSets in every namespace: node agents (and gates waiting for init pods
    beside them)."""
    csi_nodes: bool | None = None
    """list/watch CSINodes: rules that wait for CSI drivers (`csiDrivers`)."""


class DeploySettings(Documented):
    """Everything that decides the reconciler's Kubernetes objects, apart from the rules."""

    image: ImageSettings
    """The container image (repository required)."""
    namespace: DnsLabel = DEFAULT_NAMESPACE
    """Namespace of the reconciler, its rules ConfigMap, Lease and records."""
    create_namespace: bool = True
    """Create the Namespace; set false when it exists and is managed elsewhere."""
    name: Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=NAME_MAX)] = DEFAULT_NAME
    """Name of the Deployment, ServiceAccount, RBAC objects (at most 55 characters: the
    Services `<name>-metrics` and `<name>-webhook` must fit a DNS label); ClusterRole names are
    cluster-wide, so two installations in one cluster need different names (and the rules
    ConfigMap: NodeRules objects are cluster-wide, one installation on them per cluster)."""
    rules_source: Literal["objects", "configmap"] = "objects"
    """Where the reconciler reads its rules: objects (every NodeRules object, `kubectl apply -f
    rules.yaml`; each says in its status whether it is in force) or configmap (the rules
    ConfigMap, rulesConfigMap, as before NodeRules objects; `nodegate migrate configmap`
    converts it)."""
    rules_config_map: DnsSubdomain = DEFAULT_RULES_CONFIGMAP
    """Name of the ConfigMap holding the rules (rulesSource configmap); the reconciler watches
    it and hot-reloads."""
    replicas: int = Field(default=2, ge=1, le=10)
    """Replicas: one leads, the others stand by to take over within a Lease duration."""
    resources: ResourceSettings = Field(default_factory=ResourceSettings)
    priority_class_name: DnsSubdomain | None = "system-cluster-critical"
    """Priority of the pods: the reconciler lifts startup gates, so it must not be preempted
    by the workloads it lets in. None (`""` in the chart): the cluster's default priority."""
    http_port: int = Field(default=8080, ge=1, le=65535)
    """Container port of /healthz, /readyz and /metrics."""
    log_level: LogLevel = "info"
    """The least severe of the reconciler's log lines written: debug, info, warning or error."""
    log_format: LogFormat = "json"
    """json (one object a line, the context as keys: for a log pipeline) or text (a line a
    person reads, the context as key=value)."""
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=lambda: {"kubernetes.io/os": "linux"}
    )
    """Where the pods may run (the image is Linux-only)."""
    tolerations: tuple[Toleration, ...] = Field(
        default_factory=lambda: (
            Toleration(operator="Exists", effect="NoSchedule"),
            Toleration(operator="Exists", effect="PreferNoSchedule"),
        )
    )
    """Default: tolerate every NoSchedule/PreferNoSchedule taint, so the reconciler runs on
    dedicated nodes too, but not NoExecute: a failing node evicts it to a healthy one. The
    rules' own gates are tolerated whatever this says and whatever their effect (the
    reconciler is what lifts them): `nodegate.manifests.tolerations`."""
    unknown_gate_seconds: int | None = Field(default=300, ge=0)
    """With rulesSource objects: how long the pods stay on a node carrying a NoExecute taint
    nothing else here tolerates, such as the gate of a team's NodeRules object applied after
    the installation (one toleration of every NoExecute taint, this long, after all others:
    the taint manager goes by the first that matches, so the given rules' gates stay tolerated
    for ever, and the pods still leave a dead node after this long, as Kubernetes' own 300 s
    for an unreachable node). Without it, a pool whose every node is born with such a gate
    would never get a reconciler to lift it. null: none (then list each later NoExecute gate in
    tolerations)."""
    affinity: dict[str, Any] = Field(default_factory=dict)
    """The pods' Kubernetes `affinity` (nodeAffinity, podAffinity, podAntiAffinity), as in a
    pod spec; none by default (the topology spread already spreads the replicas)."""
    access: AccessSettings = Field(default_factory=AccessSettings)
    leader_election: LeaderElectionDeploy = Field(default_factory=LeaderElectionDeploy)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    service_monitor: MonitorSettings | None = None
    """A ServiceMonitor for the metrics Service (needs `metrics.service` and the Prometheus
    Operator CRDs; off by default)."""
    pod_monitor: MonitorSettings | None = None
    """A PodMonitor for the pods' http port (needs the Prometheus Operator CRDs; off by
    default). Use it or the ServiceMonitor, not both (each replica would be scraped twice)."""
    network_policy: NetworkPolicySettings | None = None
    """A NetworkPolicy limiting the pods' traffic (off by default: it needs a CNI that
    enforces policies)."""
    grafana_dashboard: DashboardSettings | None = None
    """Ship the Grafana dashboard as a ConfigMap (off by default)."""
    prometheus_rule: PrometheusRuleSettings | None = None
    """Ship the alerts as a PrometheusRule; needs the Prometheus Operator CRDs (off by default)."""
    webhook: WebhookDeploy | None = None
    """The Node admission webhook (off by default); its objects come from
    `nodegate.manifests.webhook`."""
    oci: OciDeploy | None = None
    """OCI instance state as node conditions (off by default)."""

    @property
    def labels(self) -> dict[str, str]:
        """The labels every object carries; the selector is the first two."""
        return {
            "app.kubernetes.io/name": DEFAULT_NAME,
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/part-of": "nodegate",
        }

    @property
    def selector(self) -> dict[str, str]:
        """Pod selector of the Deployment, PodDisruptionBudget and Service (never changes)."""
        return {k: v for k, v in self.labels.items() if k != "app.kubernetes.io/part-of"}

    @model_validator(mode="after")
    def _monitors(self) -> DeploySettings:
        if self.service_monitor is not None and not self.metrics.service:
            raise ValueError(
                "serviceMonitor selects the metrics Service, which metrics.service: false "
                "drops; keep the Service or use podMonitor"
            )
        return self

    @model_validator(mode="after")
    def _distinct_names(self) -> DeploySettings:
        own = {
            HISTORY_CONFIGMAP: "taint record",
            STATUS_CONFIGMAP: "status record",
            LEDGER_CONFIGMAP: "eviction ledger",
            SIGHTINGS_CONFIGMAP: "sightings record",
        }
        if self.rules_config_map in own:
            raise ValueError(
                f"rulesConfigMap '{self.rules_config_map}' is the name of the reconciler's own "
                f"{own[self.rules_config_map]}; choose another name"
            )
        return self
