"""Reconciler settings: every knob in one typed, documented place, and each one's flag.

This model is the one declaration of `nodegate reconcile`'s flags (`nodegate.core.text.flags`): a
field's flag is its name in kebab case (after its group's prefix, or as its `Flag` marker says),
its default the field's, its help the attribute docstring under it. The CLI's options and the
Deployment's arguments (`nodegate.manifests.args`) are derived from it; a new flag is a new
documented field here and nothing else.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nodegate.core.objects.installation import RULES_KEY, LogFormat, LogLevel, fence_policy_name
from nodegate.core.text.flags import Flag, FlagGroup
from nodegate.defaults.names import DEFAULT_LEASE, DEFAULT_NAME

_SETTINGS = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
"""Unknown settings refused, frozen, and each field's docstring kept as its flag's help."""


class LeaderElectionSettings(BaseModel):
    """A coordination.k8s.io Lease so two replicas never both write."""

    model_config = _SETTINGS

    enabled: Annotated[bool, Flag("leader-elect")] = True
    """Lease-based leader election: one replica writes, the others stand by to take over."""
    lease_name: str = DEFAULT_LEASE
    """Name of the leader Lease."""
    lease_namespace: str = "kube-system"
    """Namespace of the leader Lease."""
    lease_duration_seconds: int = Field(default=15, ge=2)
    """How long a standby waits after the leader's last renewal before taking over."""
    renew_deadline_seconds: int = Field(default=10, ge=1)
    """How long the leader keeps trying to renew before it gives up leadership (and exits)."""
    retry_period_seconds: int = Field(default=2, ge=1)
    """Pause between acquire/renew attempts."""
    fence_policy: str = fence_policy_name(DEFAULT_NAME)
    """ValidatingAdmissionPolicy (and binding, same name) through which the API server refuses
    a write made under a term of leadership that is over; checked when this replica starts to
    lead (absent, or empty: writes are fenced on the client only, and the log says so)."""
    identity: Annotated[str, Flag("lease-identity")] = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
        min_length=1,
        pattern=r"^\S+$",
    )
    """This replica's name in the Lease (its holderIdentity; no spaces: it is part of the fence
    token); default: the host name, the process id and a random suffix."""

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionSettings:
        if not (
            self.lease_duration_seconds
            > self.renew_deadline_seconds
            > 1.2 * self.retry_period_seconds
        ):
            raise ValueError("need leaseDuration > renewDeadline > 1.2 * retryPeriod")
        return self


class WebhookSettings(BaseModel):
    """The Node admission webhook served by every replica (leader or not: admission needs no
    leadership). See docs/reconciler.md, "Node admission webhook"."""

    model_config = _SETTINGS

    port: int = Field(default=9443, ge=0, le=65535)
    """HTTPS port of the webhook (0 picks a free port)."""
    address: str = "0.0.0.0"
    """Address the webhook's HTTPS server listens on."""
    path: str = "/mutate-nodes"
    """URL path the MutatingWebhookConfiguration calls."""
    service: str = "nodegate-webhook"
    """Name of the webhook's Service in the reconciler's namespace: the serving certificate is
    made for <service>.<namespace>.svc (and .svc.cluster.local)."""
    hosts: Annotated[tuple[str, ...], Flag("host")] = ()
    """More DNS names or IP addresses for the serving certificate (e.g. 127.0.0.1 in tests)."""
    configuration: str = "nodegate-node-admission"
    """MutatingWebhookConfiguration whose caBundle the webhook keeps (self-signed mode)."""
    tls_secret: str = "nodegate-webhook-tls"
    """Secret in the reconciler's namespace holding the CA and serving certificate that every
    replica shares (self-signed mode); it must exist (the manifests create it empty)."""
    cert_dir: Path | None = None
    """Serve tls.crt/tls.key from this directory instead (cert-manager: a mounted Secret,
    re-read when it changes); then neither the Secret nor the caBundle is touched."""
    cert_check_seconds: float = Field(default=300.0, gt=0)
    """How often the certificate is checked: renewal due, another replica renewed it, the
    caBundle drifted, the files changed."""
    lookup_timeout_seconds: float = Field(default=1.0, gt=0, le=10)
    """Budget of the persisted-label record lookup in one review; past it the node is admitted
    without its labels (the reconciler restores them a moment later). Keep it under the
    configuration's timeoutSeconds."""

    def certificate_hosts(self, namespace: str) -> tuple[str, ...]:
        """Every name the serving certificate must be valid for."""
        service = f"{self.service}.{namespace}"
        names = (self.service, service, f"{service}.svc", f"{service}.svc.cluster.local")
        return tuple(sorted({*names, *self.hosts}))


class OciSettings(BaseModel):
    """OCI instance state as node conditions (docs/reconciler.md, "OCI instance events"): the
    leader lists the instances of these compartments and writes `OCIInstanceTerminating`,
    `OCIMaintenanceRebootDue` and `OCIInstanceStopped` on their Nodes."""

    model_config = _SETTINGS

    compartments: str = Field(min_length=1, pattern=r"^[^,\s]+(,[^,\s]+)*$")
    """Compartment OCIDs whose instances are listed (ListInstances, paged) once per poll,
    comma-separated (an OCID holds no comma)."""

    @property
    def compartment_ids(self) -> tuple[str, ...]:
        return tuple(self.compartments.split(","))

    region: str = ""
    """Region of the Compute endpoint (e.g. eu-frankfurt-1); empty: the auth's own (the API
    key profile's region, the instance's or the workload's)."""
    auth: str = Field(
        default="workload_identity", pattern=r"^(workload_identity|instance_principal|api_key)$"
    )
    """workload_identity (OKE workload identity: the Pod's service account token),
    instance_principal (the node's dynamic group) or api_key (a config file and profile)."""
    config_file: Path = Path("~/.oci/config")
    """The OCI config file of `--oci-auth api_key`."""
    profile: str = "DEFAULT"
    """The profile in that file."""
    endpoint: str = ""
    """Compute endpoint override (https://...): tests, or a private endpoint; empty: the
    region's public endpoint."""
    ca_bundle: Path | None = None
    """CA bundle the endpoint's certificate is checked against (default: the system's)."""
    poll_seconds: float = Field(default=30.0, ge=1)
    """Pause between two polls of every compartment."""
    page_size: int = Field(default=100, ge=1, le=1000)
    """Instances per ListInstances page (the API's `limit`)."""
    timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    """Connect and read timeout of each OCI call."""


class ReconcilerSettings(BaseModel):
    """How one reconciler process runs."""

    model_config = _SETTINGS

    kubeconfig: Path | None = None
    """Kubeconfig file; without one, the Pod's service account (in-cluster config)."""
    rules_file: Path | None = None
    """Rules read from a file (a mounted ConfigMap); re-read when its content changes."""
    rules_configmap: str | None = None
    """Rules read from a ConfigMap `namespace/name`, watched: changes apply within a second."""
    rules_key: str = RULES_KEY
    """Key inside the ConfigMap holding the rules YAML."""
    rules_objects: bool = False
    """Rules read from every NodeRules object (the nodegate.dev API, cluster-scoped), watched
    and merged: each object's status says whether it is in force."""
    rules_poll_seconds: float = Field(default=2.0, gt=0)
    """How often a rules file is checked for new content."""
    dry_run: bool = False
    """A preview: log and record Events for what would change; write nothing (no Node, none of
    the state namespace's records), take no part in leader election, serve no webhook."""
    resync_seconds: float = Field(default=300.0, gt=0)
    """Full pass over all nodes as a safety net for missed events."""
    clock_read_seconds: float = Field(default=30.0, gt=0)
    """How often the API server's time is read (kit/server_clock.py): a disagreement is believed
    only after every reading for a minute said it, so at least a few readings a minute."""
    workers: int = Field(default=32, ge=1, le=64)
    """Nodes reconciled in parallel (one node is never handled by two workers at once). A
    worker mostly waits for the API server's answer, so in a condition storm the workers are
    the writes in flight: at 16, changed nodes waited 0.5-2.0 s for one (docs/benchmarks.md,
    "The condition storm"); at 32, 14-93 ms, for 0.2-0.3 CPU-ms more per change."""
    max_conflict_retries: int = Field(default=5, ge=1)
    """Re-read and re-plan attempts after a 409 before the node is requeued with backoff."""
    http_port: int = Field(default=8080, ge=0, le=65535)
    """Port for /healthz, /readyz and /metrics (0 picks a free port)."""
    http_address: str = "0.0.0.0"
    """Address of the /healthz, /readyz and /metrics server."""
    log_level: LogLevel = "info"
    """The least severe log lines written: debug, info, warning or error."""
    log_format: LogFormat = "json"
    """json (one object a line, the context as keys: for a log pipeline) or text (a line a
    person reads, the context as key=value)."""
    event_namespace: str = "default"
    """Namespace for Events about Nodes (cluster-scoped objects' events live in 'default')."""
    state_namespace: str | None = None
    """Namespace of the reconciler's own records (the taint-key history); default: the Pod's
    namespace (POD_NAMESPACE), else the Lease's."""
    write_qps: float = Field(default=500.0, gt=0)
    """Client-side limit on node writes per second, on average (a token bucket): a fuse
    against a write loop, not the brake. The API server protects itself (API Priority and
    Fairness answers 429 with Retry-After, honoured per node) and the eviction budget brakes
    evictions; a limit that binds in a storm only delays gate lifts, untaints and recovery as
    much as evictions (at 50/s a 1,000-node condition storm took 3.5x the API server's own
    time: docs/benchmarks.md)."""
    write_burst: int = Field(default=1000, ge=1)
    """Node writes allowed at once before the average rate applies: a condition storm over
    1,000 nodes is written at the API server's speed, then 500/s (a 5,000-node storm, whose
    changes take the API server about as long to accept, is not held back either)."""
    max_untaint_share: float = Field(default=0.5, ge=0, le=1)
    """A rules update that would remove taints from, or put new evicting (NoExecute) taints on,
    more than this share of the nodes is held until confirmed (1 disables the share check;
    empty rules that remove anything are held)."""
    confirm_rules: str | None = None
    """Digest of a held rules text to apply anyway (file mode; for a ConfigMap, annotate it
    `nodegate.dev/confirm-rules=<digest>`). The held-rules Event names the digest."""
    list_page_size: int = Field(default=200, ge=10, le=5000)
    """Objects per LIST page when (re)listing: bounds the memory a relist needs."""
    watch_timeout_seconds: int = Field(default=20, ge=10, le=55)
    """Server-side watch timeout (jittered up to a quarter more), after which the watch resumes.
    It is also each watch's liveness bound: the API server sends a bookmark 2 s before it ends a
    watch, so one silent for this long plus 5 s is presumed dead (a silent partition) and
    resumed on a new connection. Keep it under the server's 60 s bookmark period."""
    leader_election: Annotated[LeaderElectionSettings, FlagGroup()] = Field(
        default_factory=LeaderElectionSettings
    )
    """Leader election: the --leader-elect and --lease-* (and timing) flags."""
    webhook: Annotated[WebhookSettings | None, FlagGroup("webhook-", enabled_by="port")] = None
    """Serve the Node admission webhook too (None: not served): the --webhook-* flags, turned on
    by --webhook-port."""
    oci: Annotated[OciSettings | None, FlagGroup("oci-", enabled_by="compartments")] = None
    """OCI instance state as node conditions (None: off): the --oci-* flags, turned on by
    --oci-compartments."""

    @property
    def records_namespace(self) -> str:
        return (
            self.state_namespace
            or os.environ.get("POD_NAMESPACE")
            or self.leader_election.lease_namespace
        )

    @model_validator(mode="after")
    def _one_rules_source(self) -> ReconcilerSettings:
        given = [self.rules_file is not None, self.rules_configmap is not None, self.rules_objects]
        if sum(given) != 1:
            raise ValueError(
                "give exactly one of --rules-objects, --rules-configmap or --rules-file"
            )
        if self.rules_configmap is not None and self.rules_configmap.count("/") != 1:
            raise ValueError("--rules-configmap takes namespace/name, e.g. kube-system/nodegate")
        return self

    @model_validator(mode="after")
    def _a_preview_serves_no_webhook(self) -> ReconcilerSettings:
        if self.dry_run and self.webhook is not None:
            raise ValueError(
                "--dry-run serves no admission webhook: its reviews would put the previewed "
                "rules' taints on new Nodes and it would rotate the installation's certificate; "
                "drop --webhook-port"
            )
        return self
