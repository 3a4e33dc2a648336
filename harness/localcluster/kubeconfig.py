"""Kubeconfig files for the local control plane.

The same file serves the tests (via the official client), kubectl-style tools a developer points
at a kept-alive cluster, and the scheduler/controller-manager/kwok components.
"""

from __future__ import annotations

import json
from pathlib import Path

from nodegate.localcluster.certs import ClientIdentity, ControlPlanePKI

CONTEXT_NAME = "nodegate-e2e"


def write_kubeconfig(
    path: Path, server_url: str, pki: ControlPlanePKI, identity: ClientIdentity | None = None
) -> Path:
    """Write a kubeconfig for `identity` (default: the admin, in `system:masters`).

    JSON is valid YAML.
    """
    cert = identity.cert if identity else pki.admin_cert
    key = identity.key if identity else pki.admin_key
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT_NAME,
                "cluster": {
                    "server": server_url,
                    "certificate-authority": str(pki.ca_cert),
                },
            }
        ],
        "users": [
            {
                "name": CONTEXT_NAME,
                "user": {
                    "client-certificate": str(cert),
                    "client-key": str(key),
                },
            }
        ],
        "contexts": [
            {"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME}}
        ],
        "current-context": CONTEXT_NAME,
    }
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path
