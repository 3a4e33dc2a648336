"""One node's reconcile: its facts gathered, its plan charged against the eviction budget,
its patch written."""
