"""The reconciler's Kubernetes objects, built once from the rules and the deployment settings.

Plain data in, plain data out (no Pulumi, no Kubernetes client): the Pulumi `Reconciler`
component, `nodegate manifests` and the shipped `deploy/reconciler.yaml` all consume
`build_manifests`, so the three can never drift apart.
"""
