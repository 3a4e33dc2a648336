"""Wire the reconciler together and run it until SIGTERM (the container's command)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from nodegate.core.rules.model import CRD_NAME
from nodegate.core.rules.node import NodeState
from nodegate.defaults.names import CONFIRM_ANNOTATION
from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.client import load_api_client
from nodegate.reconciler.kit.events import EventRecorder, QueuedEvents
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.health import Health, serve, supervised
from nodegate.reconciler.kit.heap import freeze_startup_objects, observe_pauses
from nodegate.reconciler.kit.kube import KubeApi
from nodegate.reconciler.kit.leader import LeaderElector
from nodegate.reconciler.kit.logs import configure_logging
from nodegate.reconciler.nodes.controller import Controller
from nodegate.reconciler.nodes.fence.fence_policy import check_server_fence
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.fence.preview_api import installation_api, preview_reads
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.oci.oci_compute import ComputeLister, compute_client
from nodegate.reconciler.nodes.oci.oci_instances import OciInstanceConditions
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.nodes.rules.rules_objects import RulesObjects
from nodegate.reconciler.nodes.rules.rules_source import RulesSource, RulesUpdate, RulesWatcher
from nodegate.reconciler.nodes.rules.served_rules import ServedRules
from nodegate.reconciler.settings import ReconcilerSettings

if TYPE_CHECKING:
    from nodegate.reconciler.webhook.server import WebhookServer

log = logging.getLogger("nodegate.reconciler")

EXIT_LOST_LEADERSHIP = 3
FENCE_CHECK_SECONDS = 0.25


def run(
    settings: ReconcilerSettings,
    stop: threading.Event | None = None,
    log_stream: TextIO | None = None,
) -> int:
    """Run until stopped; exit code 0 on SIGTERM/SIGINT, 3 if leadership was lost.

    In-process use (`nodegate demo`): pass `stop` (no signal handlers are installed; set it to
    stop) and `log_stream` (nodegate's JSON logs go there instead of stderr).
    """
    in_process = stop is not None
    configure_logging(
        settings.log_level, settings.log_format, stream=log_stream, root=not in_process
    )
    stop = stop or threading.Event()
    parts = _build(settings)
    frozen = 0
    if not in_process:
        stop_on_signals(stop)
        # The process's own collector; an in-process caller's objects are not ours to freeze.
        pauses = parts.metrics.process.gc_pauses
        observe_pauses(lambda gen, seconds: pauses.labels(gen).observe(seconds))
        frozen = freeze_startup_objects()
    registry = parts.metrics.registry
    webhook = None
    if settings.webhook is not None:
        # Off by default: its server, TLS (cryptography) and asyncio load only when it is on.
        from nodegate.reconciler.webhook.server import serve_webhook  # noqa: PLC0415

        webhook = serve_webhook(settings, parts.served_rules, registry, stop, parts.health)
    ready = readiness(parts.watcher, parts.controller, parts.leading, webhook)
    server = serve(settings.http_address, settings.http_port, registry, parts.health.check, ready)
    log.info(
        "reconciler starting",
        extra={
            "identity": settings.leader_election.identity,
            "http_port": server.server_address[1],
            "dry_run": settings.dry_run,
            "rules_source": str(
                settings.rules_file or settings.rules_configmap or "NodeRules objects"
            ),
            "records_namespace": settings.records_namespace,
            "webhook_port": webhook.port if webhook is not None else None,
            "frozen_objects": frozen,
        },
    )
    if settings.dry_run:
        log.info(
            "dry run: reads the installation, writes none of it", extra=preview_reads(settings)
        )
    supervised("events", parts.recorder.run, stop, parts.health)
    supervised("rules", parts.watcher.run, stop, parts.health)
    lost = _lead_while_elected(parts, stop)
    if lost:
        exit_now(EXIT_LOST_LEADERSHIP)
    if parts.leading.is_set():  # while the fence still holds
        flushed = parts.controller.flush_labels()
        log.info("record writes flushed", extra={"nodes": flushed})
    if parts.elector is not None:
        parts.elector.stop_and_release()
    server.shutdown()
    if webhook is not None:
        webhook.shutdown()
    log.info("reconciler stopped", extra={"lost_leadership": False})
    return 0


@dataclass
class _Parts:
    metrics: Metrics
    health: Health
    recorder: QueuedEvents
    controller: Controller
    watcher: RulesSource
    served_rules: ServedRules
    elector: LeaderElector | None
    check_fence: Callable[[], None]
    """Says (log, gauge) whether the API server fences this leader's writes (with an elector)."""
    oci: Callable[[threading.Event], None] | None
    """The OCI instance poller's loop (None: not configured); run on the leader only."""
    leading: threading.Event


def _build(settings: ReconcilerSettings) -> _Parts:
    kubeconfig = str(settings.kubeconfig) if settings.kubeconfig else None
    # The client of the workers, the event sender and the watches (nodes, rules, label
    # records, init pods): its pool holds a connection for each.
    api = KubeApi(load_api_client(kubeconfig, settings.workers + 8))
    metrics = Metrics()
    process = metrics.process
    health = Health(lambda loop: process.loop_failed.labels(loop).set(1))
    controller: Controller  # made below, once the fence is known; read only when called
    recorder = QueuedEvents(
        EventRecorder(api, settings.event_namespace, settings.leader_election.identity),
        # Node writes go before their Events; a lambda: the controller is made below.
        busy=lambda: controller.queue.busy(),  # noqa: PLW0108
    )
    elector: LeaderElector | None = None
    # The webhook serves the rules in force: this replica's while it leads, else the leader's,
    # whose digest the leader writes on the Lease (`served_rules`).
    served = ServedRules(
        lambda: controller.rules_in_force.update,
        lambda: elector.leader_note if elector is not None else None,
        lambda: controller.status.recorded_in_force(),  # noqa: PLW0108 (made below)
    )
    # A dry run takes no part in the installation's election: it would lead writing nothing.
    if settings.leader_election.enabled and not settings.dry_run:
        # Its own client: lease renewals never queue behind node traffic.
        elector = LeaderElector(
            load_api_client(kubeconfig),
            settings.leader_election,
            lambda on: process.is_leader.set(int(on)),
            note=served.digest_in_force,
        )
    fence = elector.fence if elector is not None else LeaderFence(None)
    process.fence_held.set_function(lambda: int(fence.holds()))
    # In a dry run the one write client sends nothing (`preview_api`): every part is built on it.
    # Its writes go through the fence; with leader election, the fence policy's refusals are
    # read, each confirmed against the Lease.
    lease = settings.leader_election
    writes = FencedApi(
        installation_api(api, settings.dry_run),
        fence,
        lambda verdict: process.writes_fenced.labels(verdict).inc(),
        (lease.fence_policy or None) if elector is not None else None,
        elector.holds_term if elector is not None else None,
    )
    history = TaintHistory(
        writes, settings.records_namespace, lambda kind: process.errors.labels(kind).inc()
    )
    controller = Controller(settings, writes, recorder, metrics, history, health, fence)
    watcher: RulesSource
    leading = threading.Event()

    def offer(update: RulesUpdate) -> None:  # to the webhook, then to the controller
        served.offer(update)
        controller.offer_rules(update)

    source = (settings, api, recorder, metrics.rules_source, offer)
    if settings.rules_objects:
        objects = RulesObjects(
            *source,
            controller.rules_in_force.standing,
            leading.is_set,
            lambda: crd_confirmation(api),
            lambda: controller.rules_in_force.held,
        )
        controller.report_rules_objects(objects)
        watcher = objects
    else:
        watcher = RulesWatcher(*source, lambda: controller.rules_in_force.generation)

    def check_fence() -> None:
        process.server_fence.set(int(check_server_fence(api.api_client, lease).enforced))

    oci = None
    if settings.oci is not None:
        oci = _oci_poller(settings, writes, recorder, metrics, controller)
    return _Parts(
        metrics, health, recorder, controller, watcher, served, elector, check_fence, oci, leading
    )


def _oci_poller(
    settings: ReconcilerSettings,
    writes: FencedApi,
    recorder: QueuedEvents,
    metrics: Metrics,
    controller: Controller,
) -> Callable[[threading.Event], None]:
    """The OCI poller's loop, run when this replica starts to lead: the SDK is loaded and its
    client made then, and retried with backoff while that fails (no config file, no instance
    metadata, no workload identity): a bad OCI setup is said once and counted
    (`nodegate_oci_errors_total{kind="setup"}`), and never takes node work down."""
    oci = settings.oci
    assert oci is not None

    def nodes() -> list[NodeState] | None:
        if not controller.informer.synced.is_set():
            return None
        return [cached.state for _, cached in controller.informer.items()]

    def client(stop: threading.Event) -> Any:
        backoff, said = Backoff(cap_seconds=oci.poll_seconds), False
        while not stop.is_set():
            try:
                return compute_client(oci)
            except Exception as err:
                metrics.oci.errors.labels("setup").inc()
                if not said:
                    said = True
                    log.error(
                        "OCI client could not be set up; retrying with backoff (said once)",
                        extra={"auth": oci.auth, "error": f"{type(err).__name__}: {err}"[:500]},
                    )
                stop.wait(backoff.next_delay())
        return None

    def run(stop: threading.Event) -> None:
        made = client(stop)
        if made is None:
            return
        calls = metrics.oci.list_calls
        lister = ComputeLister(made, oci.page_size, lambda outcome: calls.labels(outcome).inc())
        poller = OciInstanceConditions(
            lister,
            oci.compartment_ids,
            oci.poll_seconds,
            writes,
            recorder,
            metrics.oci,
            nodes,
            lambda: datetime.now(UTC),
            settings.dry_run,
        )
        unwatch = controller.intake.watch(poller.node_changed)
        log.info(
            "OCI instance conditions on",
            extra={"compartments": list(oci.compartment_ids), "auth": oci.auth},
        )
        try:
            poller.run(stop)
        finally:
            unwatch()

    return run


def _lead_while_elected(parts: _Parts, stop: threading.Event) -> bool:
    """Run the controller while this replica leads, until `stop`; True if leadership was lost."""
    lost = threading.Event()

    def lead() -> None:
        parts.leading.set()
        if parts.elector is not None:
            threading.Thread(target=parts.check_fence, name="fence-check", daemon=True).start()
        supervised("controller", parts.controller.run, stop, parts.health)
        if parts.oci is not None:
            supervised("oci", parts.oci, stop, parts.health)

    def lose() -> None:
        lost.set()
        stop.set()

    if parts.elector is not None:
        parts.elector.start(lead, lose)
    else:
        lead()
    while not stop.wait(FENCE_CHECK_SECONDS):
        if parts.elector is not None:
            parts.elector.watch_fence(lose)
    return lost.is_set()


def crd_confirmation(api: KubeApi) -> str | None:
    """The digest a cluster admin confirmed on the NodeRules CRD (its confirm annotation)."""
    crd = api.read_crd(CRD_NAME) or {}
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    found = annotations.get(CONFIRM_ANNOTATION)
    return found if isinstance(found, str) else None


def stop_on_signals(stop: threading.Event) -> None:
    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def readiness(
    watcher: RulesSource,
    controller: Controller,
    leading: threading.Event,
    webhook: WebhookServer | None = None,
) -> Callable[[], tuple[bool, str]]:
    """/readyz: rules loaded, the webhook (if served) has a certificate and, on the leader, the
    rules in force recovered (or found unrecoverable) and the node cache synced. The webhook
    Service sends reviews only to ready replicas. A held update with nothing in force is not a
    reason to be unready (that would also take the webhook away): RulesHeld says it, with
    `nodegate_rules_held` and its alert, and `nodegate_rules_generation` is 0."""

    def ready() -> tuple[bool, str]:
        if not watcher.loaded.is_set():
            return False, "no valid rules loaded yet"
        if webhook is not None and not webhook.serving.is_set():
            return False, "webhook has no serving certificate yet"
        if leading.is_set() and not controller.rules_recovered.is_set():
            return False, "rules in force not recovered from the status record yet"
        if leading.is_set() and not controller.informer.synced.is_set():
            return False, "node cache not synced yet"
        return True, f"ok (rules generation {controller.rules_in_force.generation})"

    return ready


def exit_now(code: int) -> NoReturn:
    """Leave at once after losing leadership, as client-go's leader election does (klog.Fatal).

    Threads may be stuck in calls to an API server this replica cannot reach: they cannot be
    joined, and an interpreter shutdown with them alive can abort (SIGABRT) instead of
    returning the code the kubelet and the tests read.
    """
    log.error("exiting: leadership lost", extra={"exit_code": code})
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(code)
