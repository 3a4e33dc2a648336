#!/bin/bash
# nodegate bootstrap for OKE node pool 'data-1', ubuntu image. Generated from
# the rules file: edit the rules and re-render (nodegate render --pool data-1), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
# OKE's Ubuntu images join the cluster with the `oke` command they ship.
oke bootstrap --kubelet-extra-args '--register-with-taints=capacity.example.com/on-demand=yes:NoSchedule,flags.example.com/empty:NoSchedule,role.example.com/infra=true:NoSchedule,startup.example.com/warm-up:NoExecute,team.a-b.example.com/dedicated=data_eng-1:NoExecute,team.a-b.example.com/dedicated=data_eng-1:NoSchedule --node-labels=a.b.c/under_score=x_y-z.1,flags.example.com/empty=,nodegate.dev/pool=data-1,team.a-b.example.com/owner=data_eng-1'
