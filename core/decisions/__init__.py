"""Pure decisions over plain data: the planner (label, condition and gate taints), since when a
signal holds, the eviction budget and blast radius, persisted labels, node trust and admission,
the write fence. Above `rules`; the reconciler, webhook and CLI call them."""
