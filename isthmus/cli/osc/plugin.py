"""OSC plugin hooks: the ``multiregion`` client, found in the catalog as service
type ``multiregion``.

The Admin API runs in one region (``CentralRegion``). When the catalog has no
``multiregion`` endpoint in the region the command runs against
(``--os-region-name``, e.g. a clouds.yaml whose default region is RegionOne),
the one ``multiregion`` endpoint of the catalog is used, whatever its region;
``--os-multiregion-endpoint-override`` wins over both.
"""

from __future__ import annotations

import logging
from typing import Any

from osc_lib import exceptions, utils

LOG = logging.getLogger(__name__)

SERVICE_TYPE = "multiregion"
DEFAULT_API_VERSION = "1"
API_NAME = "multiregion"
API_VERSION_OPTION = "os_multiregion_api_version"
API_VERSIONS = {"1": "isthmus.cli.osc.client.Client"}


def make_client(instance: Any) -> Any:
    cls = utils.get_client_class(API_NAME, instance._api_version[API_NAME], API_VERSIONS)
    endpoint = find_endpoint(instance)
    LOG.debug("multiregion endpoint: %s", endpoint)
    return cls(instance.session, endpoint)


def find_endpoint(instance: Any) -> str:
    from keystoneauth1 import exceptions as ks_exceptions

    interface = instance.interface or "public"
    try:
        url = instance.get_endpoint_for_service_type(SERVICE_TYPE, region_name=instance.region_name,
                                                     interface=interface)
    except ks_exceptions.EndpointNotFound:
        url = None
    if url:
        return str(url)
    auth_ref = instance.auth_ref
    urls = sorted(set(auth_ref.service_catalog.get_urls(service_type=SERVICE_TYPE, interface=interface))) \
        if auth_ref else []
    if len(urls) == 1:
        return str(urls[0])
    if not urls:
        raise exceptions.CommandError(
            f"no '{SERVICE_TYPE}' ({interface}) endpoint in the service catalog: is the Isthmus Admin API registered?")
    raise exceptions.CommandError(
        f"several '{SERVICE_TYPE}' endpoints in the catalog ({', '.join(urls)}); choose one with --os-region-name")


def build_option_parser(parser: Any) -> Any:
    parser.add_argument(
        "--os-multiregion-api-version",
        metavar="<multiregion-api-version>",
        default=utils.env("OS_MULTIREGION_API_VERSION", default=DEFAULT_API_VERSION),
        help=f"Isthmus Admin API version, default={DEFAULT_API_VERSION} (Env: OS_MULTIREGION_API_VERSION)",
    )
    return parser

