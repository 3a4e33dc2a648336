#!/bin/bash
# nodegate bootstrap for OKE node pool 'gpu', oracle-linux image. Generated from
# the rules file: edit the rules and re-render (nodegate render --pool gpu), not this script.
# kubelet applies these taints and labels only when the node FIRST registers; existing nodes
# keep theirs until they are cycled.
set -euo pipefail
# OKE publishes its init script in the instance metadata; the service may not answer at once,
# and IPv6-only subnets reach it at its IPv6 address only: retry both, as Oracle's cloud-init does.
fetch_oke_init() {
  local attempt url
  for attempt in $(seq 1 10); do
    for url in 'http://169.254.169.254/opc/v2/instance/metadata/oke_init_script' 'http://[fd00:c1::a9fe:a9fe]/opc/v2/instance/metadata/oke_init_script'; do
      if curl --fail --silent --show-error --max-time 10 -H "Authorization: Bearer Oracle" -L0 "$url" | base64 --decode >/var/run/oke-init.sh; then
        return 0
      fi
    done
    echo "nodegate: OKE init script not available (attempt $attempt of 10)" >&2
    sleep 3
  done
  echo "nodegate: could not fetch OKE's init script from the instance metadata service" >&2
  return 1
}
fetch_oke_init
bash /var/run/oke-init.sh --kubelet-extra-args '--register-with-taints=nvidia.com/gpu=present:NoSchedule,startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule --node-labels=example.com/accelerator=nvidia,nodegate.dev/pool=gpu,persist.example.com/team=ml'
