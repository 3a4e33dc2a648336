"""The cluster `agents_cost.py` measures node agents on (data): an AKS-shaped cluster of N
nodes in four pools, 20 DaemonSets that each run a pod on every node (so N x 20 pods), the
three node-agent rules, and every object as the API server returns it.

Pods are made as the JSON an API server sends for a LIST (the DaemonSet controller's and the
kubelet's `managedFields`, the controller reference, the controller's labels, node affinity and
tolerations, the kubelet's conditions and container statuses) and parsed with `json.loads`, as
the reconciler's client does, so the views are built from what they would be in a cluster.
Each DaemonSet's pod is rendered once as text with markers for what differs from pod to pod
(name, uid, node, times, container IDs), so 100,000 pods are made in seconds.

Not every agent is Ready: on 1 % of the nodes the Cilium agent is in CrashLoopBackOff (half of
those nodes already carry the CNI rule's taint), on 1 % the Azure Disk CSI node plugin is being
replaced (terminating), and 2 % of the nodes are still starting: born with the `agents` rule's
taint, their fluent-bit not Ready yet.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import format_time
from nodegate.localcluster.nodes import SimNode, azure_provider_id

RawObject = dict[str, Any]

AGENT_RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
nodeAgents:
  - name: cni
    daemonSets: [{namespace: kube-system, name: cilium}, {namespace: kube-system, name: azure-cns}]
    taint: {key: example.com/cni-not-ready, effect: NoSchedule}
  - name: storage
    daemonSets:
      - {namespace: kube-system, name: csi-azuredisk-node}
      - {namespace: kube-system, name: csi-azurefile-node}
    csiDrivers: [{name: disk.csi.azure.com}, {name: file.csi.azure.com}]
    taint: {key: example.com/storage-not-ready, effect: NoSchedule}
    for: 5m
  - name: agents
    daemonSets: auto
    excludeDaemonSets: {labels: {example.com/not-an-agent: "true"}}
    taint: {key: example.com/agents-not-ready, effect: NoSchedule}
    mode: bootstrapOnly
"""
"""Three nodeAgents rules: two listed (two DaemonSets each, one with two CSI drivers),
continuous; one `daemonSets: auto`, bootstrapOnly (every DaemonSet in every namespace)."""

CNI_TAINT = {"key": "example.com/cni-not-ready", "effect": "NoSchedule"}
AGENTS_TAINT = {"key": "example.com/agents-not-ready", "effect": "NoSchedule"}
CSI_DRIVERS = {"disk.csi.azure.com": True, "file.csi.azure.com": True}
"""What each node's CSINode lists (`csi_nodes.registered_drivers`): both, with a count."""

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
"""The clock of the looks and plans; nodes joined during the day before."""
CLUSTER = "aks-prod-weu"
SPOT = "kubernetes.azure.com/scalesetpriority"
"""AKS's label and taint (`spot:NoSchedule`) on the nodes of a spot pool."""
POOLS = (
    ("system", 200, False),
    ("general", 3300, False),
    ("spot", 1000, True),
    ("mem", 500, False),
)
"""(pool, share of 5,000 nodes, whether a spot pool); scaled to N nodes."""

# --- placement pieces, as the charts and AKS add-ons ship them --------------------------------

LINUX = {"kubernetes.io/os": "linux"}
NOT_VIRTUAL = {"key": "type", "operator": "NotIn", "values": ["virtual-kubelet"]}
AKS_NODE = {"key": "kubernetes.azure.com/cluster", "operator": "Exists"}
LINUX_EXPR = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
ARCH_EXPR = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}
NOT_FARGATE = {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]}
ALL = [{"operator": "Exists"}]
NO_SCHEDULE_EXECUTE = [
    {"operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists", "effect": "NoExecute"},
]
CRITICAL = {"key": "CriticalAddonsOnly", "operator": "Exists"}
ON_SPOT = {"key": SPOT, "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
AGENT_TAINTS = [
    {"key": f"example.com/{name}-not-ready", "operator": "Exists", "effect": "NoSchedule"}
    for name in ("cni", "storage", "agents")
]
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def affinity(*expressions: Mapping[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    return {"nodeAffinity": required}


@dataclass(frozen=True)
class Agent:
    """One DaemonSet: where it runs (`template`: its pod template's placement) and its pod."""

    namespace: str
    name: str
    image: str
    containers: tuple[str, ...]
    init_containers: tuple[str, ...] = ()
    template: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    host_network: bool = True

    @property
    def uid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.namespace}.{self.name}.ds"))


AGENTS = (
    Agent(
        "kube-system",
        "cilium",
        "mcr.microsoft.com/oss/cilium/cilium:1.16.6",
        ("cilium-agent",),
        ("install-cni-binaries", "mount-cgroup", "apply-sysctl-overwrites", "mount-bpf-fs"),
        {
            "nodeSelector": LINUX,
            "affinity": affinity(AKS_NODE, NOT_VIRTUAL, LINUX_EXPR),
            "tolerations": ALL,
        },
    ),
    Agent(
        "kube-system",
        "azure-cns",
        "mcr.microsoft.com/containernetworking/azure-cns:v1.6.18",
        ("cns-container",),
        ("cni-installer",),
        {
            "affinity": affinity(AKS_NODE, NOT_VIRTUAL, LINUX_EXPR),
            "tolerations": [CRITICAL, *NO_SCHEDULE_EXECUTE],
        },
    ),
    Agent(
        "kube-system",
        "azure-ip-masq-agent",
        "mcr.microsoft.com/aks/ip-masq-agent-v2:v0.1.14",
        ("azure-ip-masq-agent",),
        (),
        {"affinity": affinity(AKS_NODE, NOT_VIRTUAL, LINUX_EXPR), "tolerations": ALL},
    ),
    Agent(
        "kube-system",
        "cloud-node-manager",
        "mcr.microsoft.com/oss/kubernetes/azure-cloud-node-manager:v1.31.2",
        ("cloud-node-manager",),
        (),
        {"nodeSelector": LINUX, "affinity": affinity(NOT_VIRTUAL), "tolerations": ALL},
    ),
    Agent(
        "kube-system",
        "csi-azuredisk-node",
        "mcr.microsoft.com/oss/kubernetes-csi/azuredisk-csi:v1.31.2",
        ("liveness-probe", "node-driver-registrar", "azuredisk"),
        (),
        {"nodeSelector": LINUX, "affinity": affinity(NOT_VIRTUAL, AKS_NODE), "tolerations": ALL},
    ),
    Agent(
        "kube-system",
        "csi-azurefile-node",
        "mcr.microsoft.com/oss/kubernetes-csi/azurefile-csi:v1.31.3",
        ("liveness-probe", "node-driver-registrar", "azurefile"),
        (),
        {"nodeSelector": LINUX, "affinity": affinity(NOT_VIRTUAL, AKS_NODE), "tolerations": ALL},
    ),
    Agent(
        "kube-system",
        "ama-logs",
        "mcr.microsoft.com/azuremonitor/containerinsights/ciprod:3.1.25",
        ("ama-logs", "ama-logs-prometheus"),
        (),
        {
            "affinity": affinity(LINUX_EXPR, NOT_VIRTUAL, AKS_NODE),
            "tolerations": [
                *NO_SCHEDULE_EXECUTE,
                {"operator": "Exists", "effect": "PreferNoSchedule"},
            ],
        },
    ),
    Agent(
        "kube-system",
        "ama-metrics-node",
        "mcr.microsoft.com/azuremonitor/containerinsights/ciprod/prometheus-collector:6.10.1",
        ("prometheus-collector", "addon-token-adapter"),
        (),
        {
            "affinity": affinity(LINUX_EXPR, NOT_VIRTUAL, ARCH_EXPR),
            "tolerations": [CRITICAL, *NO_SCHEDULE_EXECUTE],
        },
    ),
    Agent(
        "kube-system",
        "microsoft-defender-collector-ds",
        "mcr.microsoft.com/azuredefender/stable/pod-collector:1.0.180",
        ("microsoft-defender-collector", "microsoft-defender-publisher"),
        (),
        {"nodeSelector": LINUX, "tolerations": [CRITICAL, *NO_SCHEDULE_EXECUTE]},
    ),
    Agent(
        "kube-system",
        "secrets-store-csi-driver",
        "mcr.microsoft.com/oss/kubernetes-csi/secrets-store/driver:v1.4.7",
        ("node-driver-registrar", "secrets-store", "liveness-probe"),
        (),
        {"nodeSelector": LINUX, "affinity": affinity(NOT_VIRTUAL), "tolerations": ALL},
    ),
    Agent(
        "kube-system",
        "aks-secrets-store-provider-azure",
        "mcr.microsoft.com/oss/azure/secrets-store/provider-azure:v1.6.2",
        ("provider-azure-installer",),
        (),
        {"nodeSelector": LINUX, "affinity": affinity(NOT_VIRTUAL), "tolerations": ALL},
    ),
    Agent(
        "kube-system",
        "node-local-dns",
        "registry.k8s.io/dns/k8s-dns-node-cache:1.24.0",
        ("node-cache",),
        (),
        {
            "tolerations": [CRITICAL, *NO_SCHEDULE_EXECUTE],
            "priorityClassName": "system-node-critical",
        },
    ),
    Agent(
        "logging",
        "fluent-bit",
        "cr.fluentbit.io/fluent/fluent-bit:3.2.4",
        ("fluent-bit",),
        (),
        {"tolerations": [ON_SPOT, *AGENT_TAINTS]},
        host_network=False,
    ),
    Agent(
        "monitoring",
        "prometheus-node-exporter",
        "quay.io/prometheus/node-exporter:v1.8.2",
        ("node-exporter",),
        (),
        {
            "nodeSelector": LINUX,
            "affinity": affinity(NOT_FARGATE, NOT_VIRTUAL),
            "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}],
        },
    ),
    Agent(
        "monitoring",
        "opentelemetry-collector-agent",
        "otel/opentelemetry-collector-k8s:0.115.1",
        ("opentelemetry-collector",),
        (),
        {"nodeSelector": LINUX, "tolerations": [ON_SPOT, *AGENT_TAINTS]},
        host_network=False,
    ),
    Agent(
        "security",
        "falco",
        "docker.io/falcosecurity/falco:0.39.2",
        ("falco", "falcoctl-artifact-follow"),
        ("falco-driver-loader", "falcoctl-artifact-install"),
        {"tolerations": [CONTROL_PLANE, ON_SPOT, *AGENT_TAINTS]},
        host_network=False,
    ),
    Agent(
        "istio-system",
        "istio-cni-node",
        "docker.io/istio/install-cni:1.24.2",
        ("install-cni",),
        (),
        {"nodeSelector": LINUX, "tolerations": [CRITICAL, *NO_SCHEDULE_EXECUTE]},
    ),
    Agent(
        "istio-system",
        "ztunnel",
        "docker.io/istio/ztunnel:1.24.2",
        ("istio-proxy",),
        (),
        {"nodeSelector": LINUX, "tolerations": [CRITICAL, *NO_SCHEDULE_EXECUTE]},
        host_network=False,
    ),
    Agent(
        "ops",
        "kured",
        "ghcr.io/kubereboot/kured:1.16.2",
        ("kured",),
        (),
        {"nodeSelector": LINUX, "tolerations": [CONTROL_PLANE, ON_SPOT, *AGENT_TAINTS]},
        labels={"example.com/not-an-agent": "true"},
    ),
    Agent(
        "ops",
        "spegel",
        "ghcr.io/spegel-org/spegel:v0.0.28",
        ("registry",),
        ("configuration",),
        {"nodeSelector": LINUX, "tolerations": [ON_SPOT, CRITICAL]},
    ),
)
"""20 DaemonSets, each placed on every node of the cluster. `daemonSets: auto` waits for 18
of them: kured is excluded by its label, spegel does not tolerate the rule's taint."""

CILIUM, CSI_DISK, FLUENT_BIT = 0, 4, 12
"""Indexes in AGENTS of the agents that are not Ready on some nodes."""


def not_ready(node: int, agent: int) -> str:
    """'' (Ready), 'crash' (CrashLoopBackOff) or 'terminating' for that agent's pod there."""
    if agent == CILIUM and node % 100 == 7:
        return "crash"
    if agent == CSI_DISK and node % 100 == 42:
        return "terminating"
    if agent == FLUENT_BIT and starting(node):
        return "crash"
    return ""


def carries_cni_taint(node: int) -> bool:
    """Half of the nodes whose Cilium agent crashes carry the CNI rule's taint already."""
    return node % 200 == 7


def starting(node: int) -> bool:
    """The nodes still starting: born with the `agents` rule's taint, fluent-bit not Ready."""
    return node % 50 == 13


# --- nodes -------------------------------------------------------------------------------------


def pool_of(index: int, count: int) -> tuple[str, bool]:
    """The node's pool, and whether it is a spot pool."""
    scaled = [(name, share * count // 5000, spot) for name, share, spot in POOLS]
    for name, size, spot in scaled:
        if index < size:
            return name, spot
        index -= size
    return scaled[-1][0], scaled[-1][2]


def node_name(index: int, count: int) -> str:
    pool, _ = pool_of(index, count)
    return f"aks-{pool}-38146521-vmss{index:06d}"


def node_created(index: int) -> datetime:
    return NOW - timedelta(hours=20) + timedelta(seconds=10 * index)


def node_body(index: int, count: int) -> RawObject:
    """A Node as the API server returns it: kubelet size (40 images), AKS's labels."""
    pool, spot = pool_of(index, count)
    name = node_name(index, count)
    labels = {
        "agentpool": pool,
        "kubernetes.azure.com/agentpool": pool,
        "kubernetes.azure.com/cluster": f"MC_rg-prod_{CLUSTER}_westeurope",
        "kubernetes.azure.com/mode": "system" if pool == "system" else "user",
        "kubernetes.azure.com/node-image-version": "AKSUbuntu-2204gen2containerd-202411.12.0",
        "kubernetes.azure.com/os-sku": "Ubuntu",
        "kubernetes.azure.com/role": "agent",
        "kubernetes.azure.com/storageprofile": "managed",
        "kubernetes.azure.com/storagetier": "Premium_LRS",
        "kubernetes.io/role": "agent",
        "node-role.kubernetes.io/agent": "",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": "Standard_D8ds_v5",
        "failure-domain.beta.kubernetes.io/region": "westeurope",
        "failure-domain.beta.kubernetes.io/zone": f"westeurope-{index % 3 + 1}",
        "node.kubernetes.io/instance-type": "Standard_D8ds_v5",
        "topology.disk.csi.azure.com/zone": f"westeurope-{index % 3 + 1}",
        "topology.kubernetes.io/region": "westeurope",
        "topology.kubernetes.io/zone": f"westeurope-{index % 3 + 1}",
        "nodegate.dev/pool": pool,
    }
    taints = []
    if spot:
        labels[SPOT] = "spot"
        taints.append({"key": SPOT, "value": "spot", "effect": "NoSchedule"})
    annotations: dict[str, str] = {
        "csi.volume.kubernetes.io/nodeid": json.dumps(
            {"disk.csi.azure.com": name, "file.csi.azure.com": name}
        ),
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    for carried, taint in ((carries_cni_taint(index), CNI_TAINT), (starting(index), AGENTS_TAINT)):
        if carried:  # the reconciler's ownership annotation names what it put on, or adopted
            taints.append(dict(taint))
            annotations["nodegate.dev/owned-taints"] = f"{taint['key']}:{taint['effect']}"
    body = SimNode(
        name=name,
        provider_id=azure_provider_id(f"aks-{pool}-38146521-vmss", index),
        labels=labels,
        annotations=annotations,
        taints=taints,
        internal_ip=ip_of(index),
        images=40,
    ).body()
    body["metadata"] |= {
        "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        "creationTimestamp": format_time(node_created(index)),
        "resourceVersion": str(1_000_000 + index),
    }
    return body


def ip_of(index: int) -> str:
    return f"10.224.{index // 250}.{index % 250 + 4}"


# --- DaemonSets --------------------------------------------------------------------------------


def daemon_set_body(agent: Agent) -> RawObject:
    """A DaemonSet as the API server returns it (its pod template's placement and containers)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": agent.name,
            "namespace": agent.namespace,
            "uid": agent.uid,
            "generation": 3,
            "resourceVersion": "88123",
            "creationTimestamp": "2026-10-01T09:00:00Z",
            "labels": {"app.kubernetes.io/name": agent.name, **agent.labels},
            "annotations": {"deprecated.daemonset.template.generation": "3"},
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app.kubernetes.io/name": agent.name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": agent.name}},
                "spec": pod_spec(agent, None),
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
        },
        "status": {
            "currentNumberScheduled": 5000,
            "desiredNumberScheduled": 5000,
            "numberAvailable": 4950,
            "numberMisscheduled": 0,
            "numberReady": 4950,
            "observedGeneration": 3,
            "updatedNumberScheduled": 5000,
        },
    }


# --- pods --------------------------------------------------------------------------------------

POD_NAME, POD_UID, NODE, HOST_IP, CREATED, WRITTEN, RV = (
    "~POD~",
    "~UID~",
    "~NODE~",
    "~HOSTIP~",
    "~CREATED~",
    "~WRITTEN~",
    "~RV~",
)
MARKERS = (POD_NAME, POD_UID, NODE, HOST_IP, CREATED, WRITTEN, RV)
CONTAINER_ID = "~CID~"


def container(agent: Agent, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": agent.image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config=/etc/config/config.yaml", "--v=2"],
        "env": [
            {
                "name": "NODE_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
        ],
        "resources": {
            "limits": {"memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "livenessProbe": {
            "failureThreshold": 10,
            "httpGet": {"host": "127.0.0.1", "path": "/healthz", "port": 9879, "scheme": "HTTP"},
            "periodSeconds": 30,
            "successThreshold": 1,
            "timeoutSeconds": 5,
        },
        "readinessProbe": {
            "failureThreshold": 3,
            "httpGet": {"host": "127.0.0.1", "path": "/readyz", "port": 9879, "scheme": "HTTP"},
            "periodSeconds": 30,
            "successThreshold": 1,
            "timeoutSeconds": 5,
        },
        "securityContext": {"privileged": True},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"mountPath": "/etc/config", "name": "config", "readOnly": True},
            {"mountPath": "/host/proc", "name": "host-proc", "readOnly": True},
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access",
                "readOnly": True,
            },
        ],
    }


def pod_spec(agent: Agent, node: str | None) -> dict[str, Any]:
    """The pod template's spec; with `node`, a pod's: the DaemonSet controller's node
    affinity (matchFields on the node's name) and tolerations added, bound to the node."""
    template = dict(agent.template)
    spec: dict[str, Any] = {
        "containers": [container(agent, name) for name in agent.containers],
        "dnsPolicy": "ClusterFirstWithHostNet" if agent.host_network else "ClusterFirst",
        "enableServiceLinks": True,
        "hostNetwork": agent.host_network,
        "priorityClassName": template.pop("priorityClassName", "system-node-critical"),
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": agent.name,
        "serviceAccountName": agent.name,
        "terminationGracePeriodSeconds": 30,
        "volumes": [
            {"name": "config", "configMap": {"defaultMode": 420, "name": f"{agent.name}-config"}},
            {"name": "host-proc", "hostPath": {"path": "/proc", "type": ""}},
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                "name": "kube-root-ca.crt",
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                        "path": "namespace",
                                    }
                                ]
                            }
                        },
                    ],
                },
            },
        ],
        **template,
    }
    if agent.init_containers:
        spec["initContainers"] = [container(agent, name) for name in agent.init_containers]
    if node is None:
        return spec
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    spec |= {
        "nodeName": node,
        "affinity": {
            **(template.get("affinity") or {}),
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [by_name]}
            },
        },
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 2000001000,
        "tolerations": [
            *(template.get("tolerations") or []),
            *(
                {"effect": effect, "key": f"node.kubernetes.io/{key}", "operator": "Exists"}
                for key, effect in (
                    ("not-ready", "NoExecute"),
                    ("unreachable", "NoExecute"),
                    ("disk-pressure", "NoSchedule"),
                    ("memory-pressure", "NoSchedule"),
                    ("pid-pressure", "NoSchedule"),
                    ("unschedulable", "NoSchedule"),
                    *((("network-unavailable", "NoSchedule"),) if agent.host_network else ()),
                )
            ),
        ],
    }
    return spec


CONTAINER_FIELDS = (
    "args",
    "image",
    "imagePullPolicy",
    "name",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "securityContext",
    "livenessProbe",
    "readinessProbe",
    "resources",
    "env",
    "volumeMounts",
)


def _fields(names: Iterable[str]) -> dict[str, Any]:
    return {f"f:{name}": {} for name in names}


def managed_fields(agent: Agent) -> list[dict[str, Any]]:
    """The DaemonSet controller's create and the kubelet's status writes, as `managedFields`."""
    container_fields = {
        f'k:{{"name":"{name}"}}': {
            ".": {},
            **_fields(CONTAINER_FIELDS),
        }
        for name in (*agent.containers, *agent.init_containers)
    }
    condition_fields = {
        f'k:{{"type":"{kind}"}}': {
            ".": {},
            **_fields(["lastProbeTime", "lastTransitionTime", "status", "type"]),
        }
        for kind in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
    }
    return [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {
                        ".": {},
                        **_fields(
                            [
                                "app.kubernetes.io/name",
                                "controller-revision-hash",
                                "pod-template-generation",
                            ]
                        ),
                    },
                    "f:ownerReferences": {".": {}, f'k:{{"uid":"{agent.uid}"}}': {}},
                },
                "f:spec": {
                    "f:affinity": {
                        ".": {},
                        "f:nodeAffinity": {
                            ".": {},
                            "f:requiredDuringSchedulingIgnoredDuringExecution": {},
                        },
                    },
                    "f:containers": container_fields,
                    **_fields(
                        ["dnsPolicy", "enableServiceLinks", "hostNetwork", "priorityClassName"]
                    ),
                    **_fields(
                        ["restartPolicy", "schedulerName", "securityContext", "serviceAccount"]
                    ),
                    **_fields(
                        [
                            "serviceAccountName",
                            "terminationGracePeriodSeconds",
                            "tolerations",
                            "volumes",
                        ]
                    ),
                },
            },
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": CREATED,
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": condition_fields,
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:hostIPs": {},
                    "f:initContainerStatuses": {},
                    "f:phase": {},
                    "f:podIP": {},
                    "f:podIPs": {".": {}, f'k:{{"ip":"{HOST_IP}"}}': {".": {}, "f:ip": {}}},
                    "f:startTime": {},
                }
            },
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": WRITTEN,
        },
    ]


def container_status(agent: Agent, name: str, state: str, init: bool) -> dict[str, Any]:
    ready = init or state == ""
    if init:
        current: dict[str, Any] = {
            "terminated": {
                "containerID": CONTAINER_ID,
                "exitCode": 0,
                "finishedAt": CREATED,
                "reason": "Completed",
                "startedAt": CREATED,
            }
        }
        last: dict[str, Any] = {}
    elif state == "crash":
        current = {
            "waiting": {
                "message": f"back-off 5m0s restarting failed container={name}",
                "reason": "CrashLoopBackOff",
            }
        }
        last = {
            "terminated": {
                "containerID": CONTAINER_ID,
                "exitCode": 1,
                "finishedAt": WRITTEN,
                "reason": "Error",
                "startedAt": WRITTEN,
            }
        }
    else:
        current = {"running": {"startedAt": CREATED}}
        last = {}
    status = {
        "containerID": CONTAINER_ID,
        "image": agent.image,
        "imageID": f"{agent.image.rsplit(':', 1)[0]}@sha256:{CONTAINER_ID}",
        "lastState": last,
        "name": name,
        "ready": ready,
        "restartCount": 14 if state == "crash" and not init else 0,
        "started": ready,
        "state": current,
        "volumeMounts": [
            {
                "mountPath": "/etc/config",
                "name": "config",
                "readOnly": True,
                "recursiveReadOnly": "Disabled",
            },
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access",
                "readOnly": True,
                "recursiveReadOnly": "Disabled",
            },
        ],
    }
    if not init:
        status["allocatedResources"] = {"cpu": "100m", "memory": "128Mi"}
        status["resources"] = {
            "limits": {"memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        }
    return status


def pod_status(agent: Agent, state: str) -> dict[str, Any]:
    ready = "False" if state == "crash" else "True"

    def condition(kind: str, status: str, when: str) -> dict[str, Any]:
        found: dict[str, Any] = {
            "lastProbeTime": None,
            "lastTransitionTime": when,
            "status": status,
            "type": kind,
        }
        if status == "False":
            found["message"] = f"containers with unready status: [{agent.containers[0]}]"
            found["reason"] = "ContainersNotReady"
        return found

    became = WRITTEN if state == "crash" else CREATED
    return {
        "conditions": [
            condition("PodReadyToStartContainers", "True", CREATED),
            condition("Initialized", "True", CREATED),
            condition("Ready", ready, became),
            condition("ContainersReady", ready, became),
            condition("PodScheduled", "True", CREATED),
        ],
        "containerStatuses": [container_status(agent, n, state, False) for n in agent.containers],
        **(
            {
                "initContainerStatuses": [
                    container_status(agent, n, state, True) for n in agent.init_containers
                ]
            }
            if agent.init_containers
            else {}
        ),
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "phase": "Running",
        "podIP": HOST_IP,
        "podIPs": [{"ip": HOST_IP}],
        "qosClass": "Burstable",
        "startTime": CREATED,
    }


def pod_body(agent: Agent, state: str) -> RawObject:
    """The pod with markers for what differs from one pod of the DaemonSet to the next."""
    meta: dict[str, Any] = {
        "annotations": {"kubectl.kubernetes.io/default-container": agent.containers[0]},
        "creationTimestamp": CREATED,
        "generateName": f"{agent.name}-",
        "generation": 1,
        "labels": {
            "app.kubernetes.io/name": agent.name,
            "controller-revision-hash": "7d9f8c6b5d",
            "pod-template-generation": "3",
        },
        "managedFields": managed_fields(agent),
        "name": POD_NAME,
        "namespace": agent.namespace,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "DaemonSet",
                "name": agent.name,
                "uid": agent.uid,
            }
        ],
        "resourceVersion": RV,
        "uid": POD_UID,
    }
    if state == "terminating":
        meta |= {"deletionGracePeriodSeconds": 30, "deletionTimestamp": WRITTEN}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": pod_spec(agent, NODE),
        "status": pod_status(agent, state),
    }


class PodTemplate:
    """One DaemonSet's pod in one state as JSON text, split at its markers; and as a parsed
    tree whose strings with markers are noted, for `instantiate`."""

    def __init__(self, agent: Agent, state: str) -> None:
        text = json.dumps(pod_body(agent, state), separators=(",", ":"))
        self.parts: list[str] = []
        self.slots: list[str] = []
        rest = text
        while True:
            at = [(rest.find(m), m) for m in (*MARKERS, CONTAINER_ID) if m in rest]
            if not at:
                self.parts.append(rest)
                break
            index, marker = min(at)
            self.parts.append(rest[:index])
            self.slots.append(marker)
            rest = rest[index + len(marker) :]
        self._shared: list[Any] = []
        self._builders: list[Callable[..., Any]] = []
        self._slot = 0
        self._make = eval(f"lambda v, S, F: {self._expression(json.loads(text))}")

    def render(self, values: Mapping[str, str], seed: int) -> str:
        """The pod's text; each container ID (and image digest) a different 64-hex string."""
        out = [self.parts[0]]
        for n, (marker, part) in enumerate(zip(self.slots, self.parts[1:], strict=True)):
            out.append(values[marker] if marker != CONTAINER_ID else f"{mixed(seed, n, 256):064x}")
            out.append(part)
        return "".join(out)

    def slot_values(self, values: Mapping[str, str], seed: int) -> list[str]:
        """What `render` puts at each marker, in order."""
        return [
            values[marker] if marker != CONTAINER_ID else f"{mixed(seed, n, 256):064x}"
            for n, marker in enumerate(self.slots)
        ]

    def pod(self, values: list[str]) -> RawObject:
        """The pod as `json.loads(render(...))` would give it, from the values at its markers
        (in `slots` order): only what holds a marker is built, by a small function per
        dict or list (made from the template once), every other part of the tree is shared.
        A string that is a marker whole is that very value object."""
        built: RawObject = self._make(values, self._shared, self._builders)
        return built

    def _expression(self, node: Any) -> str:
        """Python source that builds `node` (parsed from the template's text), the values at
        its markers taken from `v` by their place in the text, every part without a marker a
        constant from `S`; a dict or list is built by a function of its own in `F`, its
        index returned (small functions: tracemalloc finds an allocation's line number by
        walking its function's code, so one function for the whole pod would take it
        milliseconds per pod)."""
        if not _marked(node):
            self._shared.append(node)
            return f"S[{len(self._shared) - 1}]"
        if isinstance(node, dict | list):
            if isinstance(node, dict):
                items = (f"{self._expression(k)}: {self._expression(v)}" for k, v in node.items())
                display = "{" + ", ".join(items) + "}"
            else:
                display = "[" + ", ".join(self._expression(item) for item in node) + "]"
            self._builders.append(eval(f"lambda v, S, F: {display}"))
            return f"F[{len(self._builders) - 1}](v, S, F)"
        pieces = []
        rest = str(node)
        while True:
            at = [(rest.find(m), m) for m in (*MARKERS, CONTAINER_ID) if m in rest]
            if not at:
                break
            index, marker = min(at)
            if index:
                pieces.append(repr(rest[:index]))
            pieces.append(f"v[{self._slot}]")
            self._slot += 1
            rest = rest[index + len(marker) :]
        if rest:
            pieces.append(repr(rest))
        return "(" + " + ".join(pieces) + ")"


def _marked(node: Any) -> bool:
    """Whether a marker is somewhere in `node` (its keys included)."""
    if isinstance(node, str):
        return any(m in node for m in (*MARKERS, CONTAINER_ID))
    if isinstance(node, dict):
        return any(_marked(k) or _marked(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_marked(item) for item in node)
    return False


def mixed(index: int, salt: int, bits: int) -> int:
    """A number that looks random, the same for the same arguments (a multiplicative hash)."""
    return ((index + 1) * 0x9E3779B97F4A7C15F39CC0605CEDC835 * (salt + 1)) & ((1 << bits) - 1)


class Pods:
    """The N x 20 DaemonSet pods, made page by page as a LIST returns them."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self._templates = {
            (a, state): PodTemplate(agent, state)
            for a, agent in enumerate(AGENTS)
            for state in ("", "crash", "terminating")
        }
        self._nodes = [(node_name(i, nodes), ip_of(i), node_created(i)) for i in range(nodes)]

    def __len__(self) -> int:
        return self.nodes * len(AGENTS)

    def text(self, index: int) -> str:
        """Pod `index` (of node index // 20, agent index % 20) as JSON text."""
        template, values = self._pod(index)
        return template.render(values, index)

    def _pod(self, index: int) -> tuple[PodTemplate, dict[str, str]]:
        node, a = divmod(index, len(AGENTS))
        name, ip, joined = self._nodes[node]
        agent = AGENTS[a]
        created = joined + timedelta(seconds=5 + a)
        written = created + timedelta(seconds=25 + index * 7 % 60)
        values = {
            POD_NAME: f"{agent.name}-{mixed(index, 0, 25):07x}",
            POD_UID: str(uuid.UUID(int=mixed(index, 1, 128), version=4)),
            NODE: name,
            HOST_IP: ip,
            CREATED: format_time(created),
            WRITTEN: format_time(written),
            RV: str(2_000_000 + index),
        }
        return self._templates[(a, not_ready(node, a))], values

    def page(self, start: int, limit: int) -> list[RawObject]:
        """Pods [start, start + limit) as a LIST's items: one JSON document parsed."""
        end = min(start + limit, len(self))
        items: list[RawObject] = json.loads(
            "[" + ",".join(self.text(i) for i in range(start, end)) + "]"
        )
        return items

    def shared_page(self, start: int, limit: int) -> list[RawObject]:
        """The same pods as `page`, equal to them, but sharing between pods every part of a
        DaemonSet's pod that is the same in all (parsed once): only what differs from pod to
        pod is parsed per pod, from one JSON document of those values. Each pod is then a few
        dozen objects instead of several hundred, which is what makes listing 100,000 pods
        under tracemalloc take seconds instead of minutes; what a view keeps of a pod comes
        from the same JSON values either way, so it holds the same bytes."""
        end = min(start + limit, len(self))
        pods = [self._pod(i) for i in range(start, end)]
        slots = [
            template.slot_values(values, i)
            for i, (template, values) in zip(range(start, end), pods, strict=True)
        ]
        parsed: list[list[str]] = json.loads(json.dumps(slots))
        return [template.pod(values) for (template, _), values in zip(pods, parsed, strict=True)]


def agent_rules(agents_mode: str = "bootstrapOnly") -> NodeRules:
    """The three rules; `agents_mode` continuous: the `agents` rule keeps its agents Ready for
    the node's life (its agents then looked up on every node, not only on those starting)."""
    return parse_rules(AGENT_RULES.replace("mode: bootstrapOnly", f"mode: {agents_mode}"))
