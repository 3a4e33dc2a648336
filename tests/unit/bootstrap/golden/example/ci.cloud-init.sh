#!/bin/bash
# nodegate bootstrap for OKE node pool 'ci'. Generated from the rules file: edit the
# rules and re-render (nodegate render --pool ci), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
curl --fail -H "Authorization: Bearer Oracle" -L0 http://169.254.169.254/opc/v2/instance/metadata/oke_init_script | base64 --decode >/var/run/oke-init.sh
bash /var/run/oke-init.sh --kubelet-extra-args '--register-with-taints=example.com/dedicated=ci:NoSchedule --node-labels=example.com/dedicated=ci,nodegate.dev/pool=ci'
