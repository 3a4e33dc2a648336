"""The rules core: one model of the rules file, its validation, and the pure decisions over it.

Everything else (bootstrap rendering, Pulumi programs, the reconciler, the CLI) imports from here
and never keeps a copy of its own. Its floors, each importing only those below it (the `layers`
contract in pyproject.toml):

    reports/    what the day-2 commands print: cluster status, a node's waits, a rules change
    objects/    the reconciler's objects: record names, the codecs of its ConfigMap records
    decisions/  the planner, since-when sightings, eviction budget, blast radius, persisted
                labels, node trust and admission, the write fence
    views/      Kubernetes objects as nodegate reads them: a pod's readiness, a DaemonSet and its
                pods, a CSINode's drivers, where the DaemonSet controller places a pod
    rules/      the rules model, its loader and cross-checks, the node as the planner sees it,
                every mark nodegate writes on a Node (node_marks.py), what nodegate knows of
                each cloud provider (providers.py)
    text/       generic: YAML in and out, located errors and hints, flags, durations, names
"""
