"""Views of Kubernetes objects as nodegate reads them: slim, typed, pure (a pod's readiness,
a DaemonSet and its pods, a CSINode's drivers, where the DaemonSet controller places a pod).
Below the decisions, which judge them; above the rules, which say what is read."""
