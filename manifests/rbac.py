"""What the reconciler may do in the API, and nothing more: its RBAC rules, decided from the
settings' `access` and the rules.

Least privilege, checked by tests and by running the reconciler under exactly these rules on a
real API server (tests/e2e/test_deploy_manifests.py):

* cluster-wide, Nodes get/list/watch/patch (the one kind it reconciles) and Events
  create/patch (Events about Nodes live in the 'default' namespace; a repeated Event is
  aggregated by patching its count);
* list/watch, cluster-wide, on what the rules may read from the cluster
  (`core.rules.cluster_reads`; `access.pods`, `.daemonSets`, `.csiNodes`): with rulesSource
  configmap the rules are known when the manifests are built, so only what they read (Pods
  only when a startup gate waits for init pods or backfills, or a node agent waits for
  DaemonSets, and DaemonSets then; CSINodes only when a rule waits for CSI drivers); with
  objects any team's rules may arrive later, so each unless `access` withholds it;
* with rules read from NodeRules objects (`rulesSource: objects`), cluster-wide get/list/watch
  on them and patch on their status (what the leader says of each), and get on their CRD by
  name (a cluster admin confirms a held update with an annotation there); none on any
  ConfigMap of rules;
* in its own namespace: with rulesSource configmap, the rules ConfigMap (get/list/watch, by
  name: the reconciler watches it with a `metadata.name` field selector), its taint record
  and status record ConfigMaps (create, which RBAC cannot restrict by name, then
  get/update/patch by name; the status record is what `nodegate status|explain|plan` read),
  its Lease (create; get/update by name), and Events about its own objects;
* when labels may persist (rules from objects, or ConfigMap rules with `persistentLabels`): the
  persisted-label record ConfigMaps in its own namespace (list/watch by label, update, delete
  for garbage collection and quarantine, patch to mark a record with the leader's term just
  before it is deleted: `core/decisions/fencing.py`). Their names derive from node keys, so
  RBAC cannot name them; the namespace holds only nodegate's own objects.

With the Node admission webhook (`manifests/webhook.py`): `get` on its namespace's ConfigMaps
when labels may persist (a new node's record, read by name at admission); with self-signed
certificates, one Secret by name (get/update: the shared CA and certificate) and one
MutatingWebhookConfiguration by name (get/patch: its caBundle); with cert-manager, neither.

With OCI instance conditions (`DeploySettings.oci`): `patch` on `nodes/status`, the only way to
write a Node's conditions; without it, none.

No other Secrets, no wildcards, and no delete outside that one case: tests refuse any other.
"""

from __future__ import annotations

from pydantic.alias_generators import to_camel

from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP
from nodegate.core.objects.sightings_record import SIGHTINGS_CONFIGMAP
from nodegate.core.objects.status_record import STATUS_CONFIGMAP
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.core.rules.cluster_reads import (
    CSI_NODES,
    DAEMON_SETS,
    PODS,
    SOURCES,
    Resource,
    cluster_reads,
)
from nodegate.core.rules.model import API_VERSION, CRD_NAME, PLURAL, NodeRules
from nodegate.manifests.settings import DeploySettings, PolicyRule, SettingsError

NODE_RULES_GROUP = API_VERSION.partition("/")[0]


def policy_rule(
    group: str, resource: str, verbs: list[str], names: list[str] | None = None
) -> PolicyRule:
    rule: PolicyRule = {"apiGroups": [group], "resources": [resource], "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


ACCESS_READS = {PODS: "pods", DAEMON_SETS: "daemon_sets", CSI_NODES: "csi_nodes"}
"""The resources an `AccessSettings` field decides; any other a source reads is granted as
unset access is (`_granted`)."""


def _granted(setting: bool | None, needed: bool, settings: DeploySettings, what: str) -> bool:
    """One access: as set, else what the rules need (configmap) or granted (objects: any
    rules may arrive). Withholding what the given rules need is refused: they would wait."""
    if setting is False and needed:
        raise SettingsError(
            f"access.{what} is false, but the rules read it; set it true (or unset), or drop "
            "the rules that need it"
        )
    if setting is not None:
        return setting
    return needed or settings.rules_source == "objects"


def cluster_reads_granted(rules: NodeRules, settings: DeploySettings) -> tuple[Resource, ...]:
    """The resources the reconciler may list/watch besides Nodes (`AccessSettings`)."""
    needed = cluster_reads(rules).resources()
    readable = dict.fromkeys(res for kind in SOURCES for res in kind.resources)
    return tuple(
        resource
        for resource in readable
        if _granted(
            getattr(settings.access, field) if (field := ACCESS_READS.get(resource)) else None,
            resource in needed,
            settings,
            to_camel(field or resource.plural),
        )
    )


def keeps_label_records(rules: NodeRules, settings: DeploySettings) -> bool:
    """Whether the reconciler may keep persisted-label records: with rules from objects always
    (any object may persist labels; without the records no rule could act: the reconciler
    waits for them before it decides a node), from the ConfigMap when they persist labels."""
    return settings.rules_source == "objects" or rules.persistent_labels is not None


def cluster_rules(rules: NodeRules, settings: DeploySettings) -> list[PolicyRule]:
    """The ClusterRole's own rules: Nodes, Events, list/watch on what the rules may read from
    the cluster (`cluster_reads_granted`); with rules from NodeRules objects, reading them all
    and writing their status; `nodes/status` patch, for the OCI conditions, when they are on."""
    granted = [
        policy_rule("", "nodes", ["get", "list", "watch", "patch"]),
        policy_rule("", "events", ["create", "patch"]),
    ]
    for resource in cluster_reads_granted(rules, settings):
        granted.append(policy_rule(resource.group, resource.plural, ["list", "watch"]))
    if settings.rules_source == "objects":
        granted += [
            policy_rule(NODE_RULES_GROUP, PLURAL, ["get", "list", "watch"]),
            policy_rule(NODE_RULES_GROUP, f"{PLURAL}/status", ["patch"]),
            # A held update is confirmed by an annotation on the CRD: cluster admins' to write.
            policy_rule("apiextensions.k8s.io", "customresourcedefinitions", ["get"], [CRD_NAME]),
        ]
    if settings.oci is not None:
        granted.append(policy_rule("", "nodes/status", ["patch"]))
    return granted


def namespace_rules(settings: DeploySettings, rules: NodeRules) -> list[PolicyRule]:
    """The Role in the reconciler's namespace: its rules, its records, its Lease, its Events."""
    lease = settings.leader_election.lease_name
    records = (
        [policy_rule("", "configmaps", ["list", "watch", "update", "patch", "delete"])]
        if keeps_label_records(rules, settings)
        else []
    )
    rules_configmap = (
        [policy_rule("", "configmaps", ["get", "list", "watch"], [settings.rules_config_map])]
        if settings.rules_source == "configmap"
        else []
    )
    return [
        *records,
        *rules_configmap,
        policy_rule("", "configmaps", ["create"]),
        policy_rule(
            "",
            "configmaps",
            ["get", "update", "patch"],
            [HISTORY_CONFIGMAP, STATUS_CONFIGMAP, LEDGER_CONFIGMAP, SIGHTINGS_CONFIGMAP],
        ),
        policy_rule("coordination.k8s.io", "leases", ["create"]),
        policy_rule("coordination.k8s.io", "leases", ["get", "update"], [lease]),
        policy_rule("", "events", ["create", "patch"]),
    ]
