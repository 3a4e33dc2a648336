"""The rules file and the node it is applied to: the typed model (rule kinds, taints, gates,
persistent labels), its loader and cross-checks, the node as the planner sees it, and what a
pool's registration carries. Above `text`."""
