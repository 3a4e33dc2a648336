#!/bin/bash
# nodegate bootstrap for OKE node pool 'plain', ubuntu image. Generated from
# the rules file: edit the rules and re-render (nodegate render --pool plain), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
# OKE's Ubuntu images join the cluster with the `oke` command they ship.
oke bootstrap --kubelet-extra-args '--node-labels=nodegate.dev/pool=plain'
