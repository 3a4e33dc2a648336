"""Leader election on a coordination.k8s.io Lease, using the official client's implementation.

The client's `LeaderElection` does acquire/renew; this adds what it lacks: an injected API
client (it otherwise uses the global default), a metric, and releasing the Lease on a clean
shutdown so a standby takes over within one retry period instead of a whole lease duration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.settings import LeaderElectionSettings

log = logging.getLogger("nodegate.leader")


class _InjectedLeaseLock(LeaseLock):
    def __init__(self, api_client: client.ApiClient, name: str, namespace: str, identity: str):
        super().__init__(name, namespace, identity)
        self.api_instance = client.CoordinationV1Api(api_client)


class LeaderElector:
    def __init__(
        self, api_client: client.ApiClient, settings: LeaderElectionSettings, metrics: Metrics
    ) -> None:
        self._api = client.CoordinationV1Api(api_client)
        self._settings = settings
        self._metrics = metrics
        self._lock = _InjectedLeaseLock(
            api_client, settings.lease_name, settings.lease_namespace, settings.identity
        )
        self.leading = False

    def run(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Block until leading, then call `on_started`; `on_stopped` if the lease is lost."""

        def started() -> None:
            self.leading = True
            self._metrics.is_leader.set(1)
            log.info("became leader", extra={"identity": self._settings.identity})
            on_started()

        def stopped() -> None:
            self.leading = False
            self._metrics.is_leader.set(0)
            log.error("lost leadership", extra={"identity": self._settings.identity})
            on_stopped()

        config = electionconfig.Config(
            self._lock,
            lease_duration=self._settings.lease_duration_seconds,
            renew_deadline=self._settings.renew_deadline_seconds,
            retry_period=self._settings.retry_period_seconds,
            onstarted_leading=started,
            onstopped_leading=stopped,
        )
        leaderelection.LeaderElection(config).run()

    def release(self) -> None:
        """Hand the Lease back (clean shutdown) so a standby can take it at once."""
        if not self.leading:
            return
        name, namespace = self._settings.lease_name, self._settings.lease_namespace
        try:
            lease = self._api.read_namespaced_lease(name, namespace)
            if lease.spec is None or lease.spec.holder_identity != self._settings.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            self._api.replace_namespaced_lease(name, namespace, lease)
            log.info("released leadership", extra={"identity": self._settings.identity})
        except ApiException as err:
            # Not fatal: the standby takes over once the lease expires.
            log.warning("could not release the lease", extra={"error": str(err)})
        self.leading = False
        self._metrics.is_leader.set(0)
