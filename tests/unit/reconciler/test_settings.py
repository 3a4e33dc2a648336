"""Reconciler settings refuse combinations that cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from nodegate.reconciler.settings import LeaderElectionSettings, ReconcilerSettings, WebhookSettings


def test_exactly_one_rules_source_is_required() -> None:
    with pytest.raises(ValidationError, match="exactly one of --rules-objects, --rules-configmap"):
        ReconcilerSettings(rules_file=Path("r.yaml"), rules_configmap="ns/cm")
    with pytest.raises(ValidationError, match="exactly one of"):
        ReconcilerSettings(rules_objects=True, rules_configmap="ns/cm")
    assert ReconcilerSettings(rules_objects=True).rules_objects


def test_configmap_reference_needs_a_namespace() -> None:
    with pytest.raises(ValidationError, match="namespace/name"):
        ReconcilerSettings(rules_configmap="nodegate-rules")


def test_lease_timings_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="leaseDuration > renewDeadline"):
        LeaderElectionSettings(lease_duration_seconds=5, renew_deadline_seconds=6)


def test_the_webhook_certificate_names_the_service_in_the_records_namespace() -> None:
    webhook = WebhookSettings(service="ng-webhook", hosts=("127.0.0.1",))
    assert webhook.certificate_hosts("ops") == (
        "127.0.0.1",
        "ng-webhook",
        "ng-webhook.ops",
        "ng-webhook.ops.svc",
        "ng-webhook.ops.svc.cluster.local",
    )


def test_a_dry_run_serves_no_webhook() -> None:
    """Its reviews would put the previewed rules' taints on new Nodes, and it would rotate the
    installation's serving certificate: a preview writes nothing."""
    with pytest.raises(ValidationError, match="--dry-run serves no admission webhook"):
        ReconcilerSettings(rules_configmap="ns/rules", dry_run=True, webhook=WebhookSettings())
