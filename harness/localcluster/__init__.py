"""A real local Kubernetes control plane (etcd + kube-apiserver, optionally scheduler,
controller-manager and kwok) built from Go modules, for the e2e tests, benchmarks and the demo."""
