"""Why a pool's bootstrap could not be rendered.

Rendering refuses rather than emits something a node would choke on at boot, where the failure
is slow to notice and far from the rules file. Every message names the pool.
"""

from __future__ import annotations


class BootstrapError(ValueError):
    """A pool's bootstrap cannot be rendered as asked (permanent: fix the input, don't retry)."""


class UserDataTooLargeError(BootstrapError):
    """The rendered user_data would not fit in the cloud's instance metadata."""

    def __init__(self, pool: str, size: int, limit: int, raw_size: int, gzipped_size: int) -> None:
        self.pool = pool
        self.size = size
        self.limit = limit
        self.raw_size = raw_size
        self.gzipped_size = gzipped_size
        super().__init__(
            f"pool '{pool}': user_data is {size:,} bytes once base64-encoded ({raw_size:,} bytes "
            f"raw, {gzipped_size:,} gzipped), over the {limit:,} bytes nodegate allows it in the "
            "instance metadata (OCI caps all of a node's metadata at 32,000 bytes, base64 "
            "included; OKE adds its own keys and nodegate the pool's kubelet-extra-args); shrink "
            "the user cloud-init given with the pool (move large files to Object Storage and "
            "fetch them at boot)"
        )
