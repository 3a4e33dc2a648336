"""The reconciler's own objects in the cluster: their names and the codecs of the
records it keeps there (status, eviction ledger, sightings, taint history; the label records'
is `decisions.persisted_labels`), read alike by the reconciler, the manifests and the day-2 CLI.
Above `decisions`."""
