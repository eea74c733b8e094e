"""Errors of the CCM.

The split matters for safety: only :class:`InstanceNotFound` may lead the
lifecycle controller to delete a Node. Everything else (an unreachable or
unknown region, a malformed providerID, duplicate names) is an error that
leaves the Node alone.
"""

from __future__ import annotations


class CCMError(Exception):
    """Base of every error the CCM reports as a one-line message."""


class InstanceNotFound(CCMError):
    """Every searched region answered, and none has the server."""


class RegionError(CCMError):
    """A region could not answer (missing from the catalog, down, 5xx...)."""

    def __init__(self, region: str, message: str) -> None:
        super().__init__(f"region {region}: {message}")
        self.region = region
        self.message = message


class UnknownRegionError(CCMError):
    """The providerID names a region this CCM does not serve."""


class MultipleResultsError(CCMError):
    """More than one server has the node's name within one region."""
