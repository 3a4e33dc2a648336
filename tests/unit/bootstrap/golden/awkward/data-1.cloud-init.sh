#!/bin/bash
# nodegate bootstrap for OKE node pool 'data-1'. Generated from the rules file: edit the
# rules and re-render (nodegate render --pool data-1), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
curl --fail -H "Authorization: Bearer Oracle" -L0 http://169.254.169.254/opc/v2/instance/metadata/oke_init_script | base64 --decode >/var/run/oke-init.sh
bash /var/run/oke-init.sh --kubelet-extra-args '--register-with-taints=capacity.example.com/on-demand=yes:NoSchedule,flags.example.com/empty:NoSchedule,role.example.com/infra=true:NoSchedule,startup.example.com/warm-up:NoExecute,team.a-b.example.com/dedicated=data_eng-1:NoExecute,team.a-b.example.com/dedicated=data_eng-1:NoSchedule --node-labels=a.b.c/under_score=x_y-z.1,flags.example.com/empty=,nodegate.dev/pool=data-1,team.a-b.example.com/owner=data_eng-1'
