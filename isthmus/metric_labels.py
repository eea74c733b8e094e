"""Label values every service's metrics share: bounded, whatever a client sends.

A label value taken from a request as it came (an invented HTTP method, a raw
path) lets any client, authenticated or not, grow a metric's series without
bound; Prometheus then spends memory per series for ever. Map to a known set.
"""

from __future__ import annotations

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def http_method(method: str | None) -> str:
    """``GET`` ... ``OPTIONS`` as they are; anything else is ``other``."""
    return method if method in HTTP_METHODS else "other"
