"""Wire the reconciler together and run it until SIGTERM (the container's command)."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from nodegate.reconciler.controller import Controller
from nodegate.reconciler.events import EventRecorder
from nodegate.reconciler.kube import KubeApi, load_api_client
from nodegate.reconciler.leader import LeaderElector
from nodegate.reconciler.logs import configure_logging
from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.probes import serve
from nodegate.reconciler.rules_source import RulesInForce, RulesWatcher
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.reconciler")

EXIT_LOST_LEADERSHIP = 3


def run(settings: ReconcilerSettings) -> int:
    """Run until stopped; exit code 0 on SIGTERM/SIGINT, 3 if leadership was lost."""
    configure_logging()
    api_client = load_api_client(str(settings.kubeconfig) if settings.kubeconfig else None)
    api = KubeApi(api_client)
    metrics = Metrics()
    identity = settings.leader_election.identity
    recorder = EventRecorder(api, settings.event_namespace, identity)
    in_force = RulesInForce()
    controller = Controller(settings, api, in_force, recorder, metrics)
    watcher = RulesWatcher(settings, api, recorder, metrics, in_force, controller.on_rules_changed)
    stop = threading.Event()
    lost = threading.Event()
    leading = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def healthy() -> tuple[bool, str]:
        return (not lost.is_set(), "lost leadership" if lost.is_set() else "ok")

    def ready() -> tuple[bool, str]:
        if not in_force.loaded.is_set():
            return False, "no valid rules loaded yet"
        if leading.is_set() and not controller.informer.synced.is_set():
            return False, "node cache not synced yet"
        return True, f"ok (rules generation {in_force.generation})"

    server = serve(settings.http_address, settings.http_port, metrics.registry, healthy, ready)
    log.info(
        "reconciler starting",
        extra={
            "identity": identity,
            "http_port": server.server_address[1],
            "dry_run": settings.dry_run,
            "rules_source": str(settings.rules_file or settings.rules_configmap),
        },
    )
    threading.Thread(target=watcher.run, args=(stop,), name="rules", daemon=True).start()

    def lead() -> None:
        leading.set()
        controller.run(stop)

    def lose() -> None:
        lost.set()
        stop.set()

    elector: LeaderElector | None = None
    if settings.leader_election.enabled:
        elector = LeaderElector(api_client, settings.leader_election, metrics)
        election = threading.Thread(
            target=elector.run, args=(lead, lose), name="leader", daemon=True
        )
        election.start()
    else:
        threading.Thread(target=lead, name="controller", daemon=True).start()

    stop.wait()
    if elector is not None:
        elector.release()
    server.shutdown()
    log.info("reconciler stopped")
    return EXIT_LOST_LEADERSHIP if lost.is_set() else 0
