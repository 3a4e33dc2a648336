#!/bin/bash
# nodegate bootstrap for OKE node pool 'gpu-oke', ubuntu image. Generated from
# the rules file: edit the rules and re-render (nodegate render --pool gpu-oke), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
# OKE's Ubuntu images join the cluster with the `oke` command they ship.
oke bootstrap --kubelet-extra-args '--register-with-taints=nvidia.com/gpu=present:NoSchedule,startup-taint.cluster-autoscaler.kubernetes.io/gpu-init=wait:NoSchedule --node-labels=example.com/accelerator=nvidia,nodegate.dev/pool=gpu-oke'
