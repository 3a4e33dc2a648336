"""The one way writes reach the API server: fenced by the Lease (or refused outright in a
preview)."""
