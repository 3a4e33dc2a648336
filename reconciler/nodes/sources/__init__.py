"""What the rules read from the cluster besides Nodes (pods, DaemonSets, CSINodes), each
followed by one informer."""
