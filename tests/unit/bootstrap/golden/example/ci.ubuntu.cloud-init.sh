#!/bin/bash
# nodegate bootstrap for OKE node pool 'ci', ubuntu image. Generated from
# the rules file: edit the rules and re-render (nodegate render --pool ci), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
# OKE's Ubuntu images join the cluster with the `oke` command they ship.
oke bootstrap --kubelet-extra-args '--register-with-taints=example.com/dedicated=ci:NoSchedule --node-labels=example.com/dedicated=ci,nodegate.dev/pool=ci'
