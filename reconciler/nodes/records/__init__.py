"""The reconciler's records in the cluster (persisted labels, sightings, the eviction ledger,
taint history) and their stores."""
