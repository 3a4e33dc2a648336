"""Pure rendering of the rules into node bootstrap: OKE cloud-init, kubelet flags, AKS pools."""
