"""What the e2e tests share, apart from the tests themselves (tests/e2e/README.md, "Layout").

* Fixtures, registered in tests/e2e/conftest.py: `reconciler_fixtures` (rules, a rules
  ConfigMap, nodes, one reconciler), `real_kubelet`, `node_identity` (acting as a node),
  `lease_params` (kube-apiserver's Lease param informer kept alive for the session).
* Processes and scenes: `reconciler_process` (the real `nodegate reconcile` as a process),
  `webhook_fixtures` (the Node admission webhook registered with the API server),
  `shipped_manifests` (deploy/reconciler.yaml applied), `karpenter_scene` (also used by
  tests/bench), `agent_scene` (the node-agent tests' namespace, nodes and DaemonSets),
  `rendered_kubelet_args`, `tcp_proxy` (a partition one client sees).
* Entry points run as `python -m tests.e2e.support.<name>` by the tests: `held_writer` and
  `skewed_reconciler`, each the real `nodegate reconcile` with one thing made to go wrong.
"""
