"""OCI instance state read from the Compute API and shown as node conditions (the `oci` extra)."""
