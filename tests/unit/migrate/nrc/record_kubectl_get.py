"""Record `kubectl get nrr -o yaml --show-managed-fields` as a real API server prints it.

Run once by hand (it is not a test): starts the harness's local control plane, installs
node-readiness-controller's CRD (its chart's crds/ file, passed as the argument), applies the
rules below, writes a status for two of them through the status subresource (what the
controller writes: appliedNodes, nodeEvaluations, dryRunResults) and saves what kubectl prints
to kubectl-get-nrr.yaml next to this file.

    .venv/bin/python tests/unit/migrate/nrc/record_kubectl_get.py CRD.yaml
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nodegate.localcluster.cluster import LocalControlPlane

HERE = Path(__file__).parent
RULES = (
    HERE / "config/samples/v1alpha1_nodereadinessrule.yaml",
    HERE / "examples/problem-gate-readiness/problem-gate-rule.yaml",
    HERE / "test/e2e/testdata/multi-condition-rule.yaml",
    HERE / "test/e2e/testdata/dryrun-rule.yaml",
    HERE / "any-of-rule.yaml",
)
EVALUATED = "2026-11-24T22:30:00Z"
STATUS = {
    "nodereadinessrule-sample": {
        "observedGeneration": 1,
        "appliedNodes": ["worker-1"],
        "nodeEvaluations": [
            {
                "nodeName": "worker-1",
                "conditionResults": [
                    {
                        "type": "network.kubernetes.io/CNIReady",
                        "currentStatus": "False",
                        "requiredStatus": "True",
                        "defaultStatus": "Unknown",
                    }
                ],
                "taintStatus": "Present",
                "lastEvaluationTime": EVALUATED,
            }
        ],
    },
    "dryrun-test-rule": {
        "dryRunResults": {
            "affectedNodes": 2,
            "taintsToAdd": 1,
            "taintsToRemove": 0,
            "riskyOperations": 1,
            "summary": "Would add taint to 1 node(s); 1 node(s) missing required conditions",
        }
    },
}


def main(crd: Path) -> None:
    with LocalControlPlane() as plane:

        def kubectl(*args: str, stdin: str | None = None) -> str:
            argv = ["kubectl", "--kubeconfig", str(plane.kubeconfig_path), *args]
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True)
            return done.stdout

        kubectl("apply", "-f", str(crd))
        kubectl(
            "wait", "--for=condition=Established", "crd/nodereadinessrules.readiness.node.x-k8s.io"
        )
        for rule in RULES:
            kubectl("apply", "-f", str(rule))
        for name, status in STATUS.items():
            patch = json.dumps({"status": status})
            kubectl("patch", "nrr", name, "--subresource=status", "--type=merge", "-p", patch)
        printed = kubectl("get", "nrr", "-o", "yaml", "--show-managed-fields")
    (HERE / "kubectl-get-nrr.yaml").write_text(printed, encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
