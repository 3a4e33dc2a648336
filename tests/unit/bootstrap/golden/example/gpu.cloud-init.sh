#!/bin/bash
# nodegate bootstrap for OKE node pool 'gpu'. Generated from the rules file: edit the
# rules and re-render (nodegate render --pool gpu), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
curl --fail -H "Authorization: Bearer Oracle" -L0 http://169.254.169.254/opc/v2/instance/metadata/oke_init_script | base64 --decode >/var/run/oke-init.sh
bash /var/run/oke-init.sh --kubelet-extra-args '--register-with-taints=nvidia.com/gpu=present:NoSchedule,startup.example.com/initializing=wait:NoSchedule --node-labels=example.com/accelerator=nvidia,nodegate.dev/pool=gpu,persist.example.com/team=ml'
