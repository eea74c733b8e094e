"""Node ``spec.providerID`` values: ``openstack://[REGION]/INSTANCE_ID``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from isthmus.ccm.errors import CCMError

SCHEME = "openstack://"
REGIONAL_ENV = "OS_CCM_REGIONAL"
_PATTERN = re.compile(r"openstack://([^/]*)/([^/]+)")


class ProviderIDError(CCMError, ValueError):
    """A providerID that is not ours or is malformed (never "not found")."""


@dataclass(frozen=True)
class ProviderID:
    instance_id: str
    region: str = ""  # empty: the providerID does not say


def parse(provider_id: str) -> ProviderID:
    """Parse as OCCM does, including its normalisation.

    A value without ``://`` gets ``openstack://`` prepended, so the kubelet's
    ``/ID`` (kubernetes#85731) reads as ``openstack:///ID`` and ``R/ID`` as
    region R. The error shows the normalised value, as OCCM's does.
    """
    normalised = provider_id if "://" in provider_id else SCHEME + provider_id
    match = _PATTERN.fullmatch(normalised)
    if not match:
        raise ProviderIDError(
            f'ProviderID "{normalised}" didn\'t match expected format "openstack://region/InstanceID"'
        )
    return ProviderID(instance_id=match.group(2), region=match.group(1))


def regional_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """``OS_CCM_REGIONAL`` is on only for the exact string ``true``.

    Read on every call (as OCCM does), so it can be flipped without a restart.
    """
    return (os.environ if environ is None else environ).get(REGIONAL_ENV) == "true"


def format(instance_id: str, region: str = "", regional: bool | None = None) -> str:  # noqa: A001 - the module is used as providerid.format
    """``openstack:///ID``, or ``openstack://REGION/ID`` in regional mode.

    ``region`` is where the server was found; ``regional`` defaults to the
    environment switch.
    """
    if regional is None:
        regional = regional_enabled()
    return f"{SCHEME}{region if regional else ''}/{instance_id}"
