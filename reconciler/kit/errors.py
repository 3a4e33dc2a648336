"""The kinds an API call fails as, whatever the transport raised: what a caller does next
depends only on the kind (retry later, give up, re-read, forget the object, list again)."""

from __future__ import annotations


class KubeError(Exception):
    """An API call failed."""


class TemporaryError(KubeError):
    """Network trouble, 5xx, 429: retry later with backoff (not before `retry_after`)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ThrottledError(TemporaryError):
    """429: the API server's own flow control (API Priority and Fairness) turned the request
    away. Not a fault: retried no sooner than its Retry-After, and counted apart from failures."""


class PermanentError(KubeError):
    """400, 403, 422...: retrying the same request cannot succeed until something else changes."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ConflictError(KubeError):
    """409: the object changed since it was read. Re-read, re-plan, retry."""


class NotFoundError(KubeError):
    """404: the object is gone (a node deleted while we worked on it)."""


class GoneError(KubeError):
    """410: a watch's or a list continuation's resourceVersion is too old; list again."""


class TimedOutError(TemporaryError):
    """No byte arrived within the call's read deadline: the connection is presumed dead (a
    partition that neither closes nor refuses it), so the pool's idle connections, which took
    the same path, are dropped too."""


class WatchStalledError(TimedOutError):
    """A watch delivered nothing (no event, no bookmark, no end) for longer than its liveness
    bound: presumed dead, and resumed from the last resourceVersion on a new connection."""
