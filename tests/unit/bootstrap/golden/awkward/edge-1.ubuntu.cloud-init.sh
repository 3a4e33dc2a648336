#!/bin/bash
# nodegate bootstrap for OKE node pool 'edge-1', ubuntu image. Generated from
# the rules file: edit the rules and re-render (nodegate render --pool edge-1), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
# OKE's Ubuntu images join the cluster with the `oke` command they ship.
oke bootstrap --kubelet-extra-args '--register-with-taints=edge.example.com/zone=z_1.a-b:PreferNoSchedule,startup.example.com/edge_init=wait-1:NoSchedule --node-labels=capacity.example.com/type=spot,nodegate.dev/pool=edge-1'
