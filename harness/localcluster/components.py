"""Command lines of each control-plane component.

Kept apart from process handling so the flags, which are what a reader checks against the
Kubernetes docs, sit together in one short file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodegate.localcluster import paths
from nodegate.localcluster.certs import SERVICE_CLUSTER_IP_RANGE, ControlPlanePKI

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Nodes whose annotations match this are driven by kwok; others are left alone, so tests can
# still create "dead" nodes that nobody heartbeats for.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"


@dataclass(frozen=True)
class EtcdEndpoints:
    """Where etcd listens; both on loopback, on ports picked when the cluster starts."""

    client_port: int
    peer_port: int

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


def etcd_argv(bin_dir: Path, data_dir: Path, endpoints: EtcdEndpoints) -> list[str]:
    """A single-member etcd; `--unsafe-no-fsync` because test data never needs to survive."""
    return [
        str(bin_dir / paths.ETCD),
        "--name=nodegate-e2e",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={endpoints.client_url}",
        f"--advertise-client-urls={endpoints.client_url}",
        f"--listen-peer-urls={endpoints.peer_url}",
        f"--initial-advertise-peer-urls={endpoints.peer_url}",
        f"--initial-cluster=nodegate-e2e={endpoints.peer_url}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(
    bin_dir: Path,
    cert_dir: Path,
    pki: ControlPlanePKI,
    etcd: EtcdEndpoints,
    *,
    secure_port: int,
    service_account_admission: bool,
) -> list[str]:
    """kube-apiserver as controller-runtime's envtest runs it, plus Node authorization.

    Without kube-controller-manager nobody creates the `default` ServiceAccount, so the
    ServiceAccount admission plugin would reject every pod: it is disabled in that case.
    NodeRestriction is added because real clusters (OKE, AKS) run it and it limits what a
    kubelet identity may change on Nodes, which is what nodegate is about.
    """
    argv = [
        str(bin_dir / paths.KUBE_APISERVER),
        f"--etcd-servers={etcd.client_url}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--secure-port={secure_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        # The `kubernetes` Endpoints may not hold a loopback address; nothing in-cluster
        # dials it here, so don't let the reconciler log an error every 10 seconds.
        "--endpoint-reconciler-type=none",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.service_account_public_key}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--profiling=false",
    ]
    if not service_account_admission:
        argv.append("--disable-admission-plugins=ServiceAccount")
    return argv


def audit_argv(policy: Path, log_path: Path) -> list[str]:
    """An audit log as JSON lines, written synchronously (blocking) so none is dropped."""
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log_path}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=0",
    ]


def scheduler_argv(bin_dir: Path, kubeconfig: Path) -> list[str]:
    """The default scheduler; no serving port (nothing scrapes it) and no leader election."""
    return [
        str(bin_dir / paths.KUBE_SCHEDULER),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",
    ]


def controller_manager_argv(bin_dir: Path, kubeconfig: Path, pki: ControlPlanePKI) -> list[str]:
    """All default controllers: node lifecycle (not-ready taints, taint eviction), DaemonSet,
    ServiceAccount, garbage collection, ... exactly the ones that touch nodes in production."""
    return [
        str(bin_dir / paths.KUBE_CONTROLLER_MANAGER),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",
        "--controllers=*",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
    ]


# kwok renews node Leases with 4 workers by default (kwok v0.8.0, `nodeLeaseParallelism`): one
# renewal per node every 10 s is 500/s at 5,000 nodes, so a round trip over 8 ms left Leases
# behind. Measured in `make bench` at 5,000 nodes: 2,763 nodes tainted unreachable by the
# node-lifecycle controller, their Leases 80-140 s old, and the cluster never settled. Each
# kubelet renews its own Lease, so 5,000 real ones renew in parallel; 64 workers keep up while
# a round trip stays under 128 ms. kwok does not default the other options of a configuration
# file it is given (it exits: "playStageParallelism must be greater than 0"), so they are
# spelled out with kwok v0.8.0's defaults.
KWOK_CONFIGURATION = """apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/24
  nodeLeaseParallelism: 64
  nodePlayStageParallelism: 4
  podPlayStageParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
"""


def kwok_argv(
    bin_dir: Path, kubeconfig: Path, configuration: Path, stage_files: list[Path]
) -> list[str]:
    """kwok as the kubelets of annotated nodes: Ready conditions, Lease heartbeats, pods Ready.
    `configuration` holds `KWOK_CONFIGURATION`."""
    argv = [
        str(bin_dir / paths.KWOK),
        f"--kubeconfig={kubeconfig}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector="
        f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
        "--node-lease-duration-seconds=40",
        "--server-address=",
    ]
    argv += [f"--config={path}" for path in [configuration, *stage_files]]
    return argv
