"""Wire the reconciler together and run it until SIGTERM (the container's command)."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from nodegate.reconciler.controller import Controller
from nodegate.reconciler.events import EventRecorder
from nodegate.reconciler.health import Health, supervised
from nodegate.reconciler.kube import KubeApi, load_api_client
from nodegate.reconciler.leader import LeaderElector, LeaderFence
from nodegate.reconciler.logs import configure_logging
from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.probes import serve
from nodegate.reconciler.rules_source import RulesWatcher
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.taint_history import TaintHistory

log = logging.getLogger("nodegate.reconciler")

EXIT_LOST_LEADERSHIP = 3
FENCE_CHECK_SECONDS = 0.25


def run(settings: ReconcilerSettings) -> int:
    """Run until stopped; exit code 0 on SIGTERM/SIGINT, 3 if leadership was lost."""
    configure_logging()
    api_client = load_api_client(str(settings.kubeconfig) if settings.kubeconfig else None)
    api = KubeApi(api_client)
    metrics = Metrics()
    health = Health(metrics)
    identity = settings.leader_election.identity
    recorder = EventRecorder(api, settings.event_namespace, identity)
    history = TaintHistory(
        api, settings.records_namespace, lambda kind: metrics.errors.labels(kind).inc()
    )
    stop = threading.Event()
    lost = threading.Event()
    leading = threading.Event()

    elector: LeaderElector | None = None
    fence = LeaderFence(None)
    if settings.leader_election.enabled:
        # Its own client: lease renewals never queue behind node traffic.
        election_client = load_api_client(str(settings.kubeconfig) if settings.kubeconfig else None)
        elector = LeaderElector(election_client, settings.leader_election, metrics)
        fence = elector.fence
    controller = Controller(settings, api, recorder, metrics, history, fence, health=health)
    watcher = RulesWatcher(
        settings,
        api,
        recorder,
        metrics,
        controller.offer_rules,
        lambda: controller.applied.generation if controller.applied else 0,
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def ready() -> tuple[bool, str]:
        if not watcher.loaded.is_set():
            return False, "no valid rules loaded yet"
        if leading.is_set() and not controller.informer.synced.is_set():
            return False, "node cache not synced yet"
        applied = controller.applied
        generation = applied.generation if applied else 0
        return True, f"ok (rules generation {generation})"

    server = serve(settings.http_address, settings.http_port, metrics.registry, health.check, ready)
    log.info(
        "reconciler starting",
        extra={
            "identity": identity,
            "http_port": server.server_address[1],
            "dry_run": settings.dry_run,
            "rules_source": str(settings.rules_file or settings.rules_configmap),
            "records_namespace": settings.records_namespace,
        },
    )
    supervised("rules", watcher.run, stop, health)

    def lead() -> None:
        leading.set()
        supervised("controller", controller.run, stop, health)

    def lose() -> None:
        lost.set()
        stop.set()

    if elector is not None:
        elector.start(lead, lose)
    else:
        lead()

    while not stop.wait(FENCE_CHECK_SECONDS):
        if elector is not None:
            elector.watch_fence(lose)
    if elector is not None:
        elector.stop_and_release()
    server.shutdown()
    log.info("reconciler stopped", extra={"lost_leadership": lost.is_set()})
    return EXIT_LOST_LEADERSHIP if lost.is_set() else 0
