"""The in-cluster controller that keeps node labels and taints true at run time."""
