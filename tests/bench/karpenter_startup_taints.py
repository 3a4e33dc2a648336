"""What Karpenter does when nodes are born gated but the gate is left out of the NodePool's
`startupTaints`: nodes and NodeClaims every 5 s for 2 minutes while the init is still working
(the gate is never lifted in the window). A measurement, not a test: `make bench-karpenter`.

The e2e test beside it (tests/e2e/test_karpenter_gates.py) asserts the case nodegate renders:
with the gate in `startupTaints`, exactly one node, lifted by its init pod.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.karpenter import LocalKarpenter
from tests.e2e.support.karpenter_scene import GATE, REPLICAS, start_scene
from tests.e2e.support.reconciler_fixtures import taints_of


def measure(plane: LocalControlPlane, workdir: Path, seconds: float, every: float) -> None:
    """Sample the scene with the gate left out of startupTaints and print the table."""
    with ExitStack() as stack:
        name = f"left-out-{uuid.uuid4().hex[:6]}"
        scene = start_scene(plane, stack, name, workdir, startup_taints=False)
        started = time.monotonic()
        seen_claims: set[str] = set()
        samples: list[tuple[float, int, int, int]] = []
        while (elapsed := time.monotonic() - started) < seconds:
            claims = scene.nodeclaims()
            seen_claims.update(claims)
            nodes = scene.nodes()
            gated = sum(1 for n in nodes if GATE in taints_of(scene.core, n.metadata.name))
            samples.append((elapsed, len(nodes), gated, len(claims)))
            time.sleep(every)
        bound = sum(1 for p in scene.pods(scene.work) if p.spec.node_name)
    print("Karpenter, gate NOT in startupTaints (nodes born gated, init held):")
    print("  t(s)  nodes  gated  nodeclaims")
    for elapsed, nodes_now, gated_now, claims_now in samples:
        print(f"  {elapsed:5.0f}  {nodes_now:5d}  {gated_now:5d}  {claims_now:10d}")
    print(
        f"  NodeClaims created in {seconds:.0f}s: {len(seen_claims)}; max nodes at "
        f"once: {max(s[1] for s in samples)}; workload pods bound: {bound}/{REPLICAS}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to sample")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nodegate-bench-karpenter-") as scratch:
        workdir = Path(scratch)
        with LocalControlPlane(with_scheduling=True) as plane:
            karpenter = LocalKarpenter(plane, workdir)
            karpenter.start()
            try:
                measure(plane, workdir, args.seconds, args.every)
            finally:
                karpenter.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
