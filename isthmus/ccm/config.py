"""OCCM ``cloud.conf`` reader, with the multi-region ``regions`` list.

The file is read unchanged from OCCM (see :mod:`isthmus.ccm.gcfg` for the
syntax). Typing follows gcfg: string keys need ``=``; booleans accept
true/yes/on/1 and false/no/off/0, and a bare key means true; list keys
(``regions``, ``public-network-name``, ``internal-network-name``) append one
element per occurrence and a bare occurrence empties the list. Unknown keys
and sections are warned about and ignored; bad syntax or bad values are fatal
(:class:`ConfigError`).

Deliberate deviations from OCCM, all toward the documented intent:

* the region search list is ``[region] + regions`` (INI) ``+ regions:``
  (clouds.yaml), de-duplicated in order, empties dropped; OCCM's INI path
  drops ``region`` when ``regions`` is set, and its clouds path discards the
  INI ``regions``;
* ``region`` is split on commas in both paths (OCCM only in the clouds path);
* no region at all is an error: a multi-region controller cannot name the
  region of a node without one (OCCM accepts it and uses any catalog entry);
* ``[Global "name"]`` subsections are warned about (OCCM ignores them silently).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from isthmus.ccm import gcfg
from isthmus.ccm.errors import CCMError
from isthmus.ccm.gcfg import parse_bool
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig, set_option
from isthmus.kube.durations import parse_duration

LOG = logging.getLogger(__name__)

DEFAULT_SEARCH_ORDER = "configDrive,metadataService"
DEFAULT_REQUEST_TIMEOUT = 60.0
SEARCH_ORDER_ELEMENTS = ("configDrive", "metadataService")


class ConfigError(CCMError, ValueError):
    """The configuration cannot be used; the controller must not start."""


class Kind(Enum):
    STR = "string"
    BOOL = "bool"
    LIST = "list"


@dataclass
class AuthOptions:
    """``[Global]``: Keystone credentials and the regions to serve."""

    auth_url: str = ""
    user_id: str = ""
    username: str = ""
    password: str = ""
    tenant_id: str = ""
    tenant_name: str = ""
    trust_id: str = ""
    trustee_id: str = ""
    trustee_password: str = ""
    domain_id: str = ""
    domain_name: str = ""
    tenant_domain_id: str = ""
    tenant_domain_name: str = ""
    user_domain_id: str = ""
    user_domain_name: str = ""
    region: str = ""
    regions: list[str] = field(default_factory=list)
    endpoint_type: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    tls_insecure: str = ""
    token: str = ""
    use_clouds: bool = False
    clouds_file: str = ""
    cloud: str = ""
    application_credential_id: str = ""
    application_credential_name: str = ""
    application_credential_secret: str = ""

    @property
    def interface(self) -> str:
        """Catalog interface; OCCM uses ``public`` when it is empty."""
        return self.endpoint_type or "public"

    @property
    def verify_tls(self) -> bool:
        """Only the exact string ``true`` disables verification (as OCCM)."""
        return self.tls_insecure != "true"


@dataclass
class NetworkingOptions:
    """``[Networking]``: how node addresses are derived (see addresses.py)."""

    ipv6_support_disabled: bool = False
    public_network_name: list[str] = field(default_factory=list)
    internal_network_name: list[str] = field(default_factory=list)
    address_sort_order: str = ""


@dataclass
class MetadataOptions:
    """``[Metadata]``: only validated; ``request_timeout`` is the API timeout."""

    search_order: str = ""
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


@dataclass
class CloudConfig:
    """The whole configuration, after clouds.yaml and region merging."""

    global_: AuthOptions
    networking: NetworkingOptions
    metadata: MetadataOptions
    regions: tuple[str, ...]  # the search order; regions[0] is the default region
    warnings: tuple[str, ...] = ()
    load_balancer: LoadBalancerConfig = field(default_factory=LoadBalancerConfig)

    @property
    def default_region(self) -> str:
        return self.regions[0]


# INI key -> (dataclass field, kind). Keys whose field name differs from the
# key (OCCM's gcfg tags) are spelled out; ``os-endpoint-type`` keeps its prefix.
_GLOBAL_KINDS = {"regions": Kind.LIST, "use_clouds": Kind.BOOL}
_GLOBAL_KEYS: dict[str, tuple[str, Kind]] = {
    f.name.replace("_", "-"): (f.name, _GLOBAL_KINDS.get(f.name, Kind.STR))
    for f in fields(AuthOptions)
    if f.name != "endpoint_type"
}
_GLOBAL_KEYS["os-endpoint-type"] = ("endpoint_type", Kind.STR)

_NETWORKING_KEYS = {
    "ipv6-support-disabled": ("ipv6_support_disabled", Kind.BOOL),
    "public-network-name": ("public_network_name", Kind.LIST),
    "internal-network-name": ("internal_network_name", Kind.LIST),
    "address-sort-order": ("address_sort_order", Kind.STR),
}
_METADATA_KEYS = {
    "search-order": ("search_order", Kind.STR),
    "request-timeout": ("request_timeout", Kind.STR),
}
_SCHEMA: dict[str, dict[str, tuple[str, Kind]]] = {
    "global": _GLOBAL_KEYS,
    "networking": _NETWORKING_KEYS,
    "metadata": _METADATA_KEYS,
}
# Sections OCCM knows but this CCM does not use: accepted silently.
# ([LoadBalancer] and [LoadBalancer "REGION"] are read by _apply.)
_OTHER_OCCM_SECTIONS = frozenset({"loadbalancerclass", "route"})

def check_metadata_search_order(order: str) -> None:
    """OCCM's CheckMetadataSearchOrder, with its exact error texts."""
    if order == "":
        raise ConfigError("invalid value in section [Metadata] with key `search-order`. Value cannot be empty")
    elements = order.split(",")
    if len(elements) > 2:
        raise ConfigError(
            "invalid value in section [Metadata] with key `search-order`. Value cannot contain more than 2 elements"
        )
    for element in elements:
        if element.strip() not in SEARCH_ORDER_ELEMENTS:
            raise ConfigError(
                f'invalid element "{element}" found in section [Metadata] with key `search-order`.'
                'Supported elements include "configDrive" and "metadataService"'
            )


def merge_regions(*groups: Iterable[str]) -> tuple[str, ...]:
    """Concatenate region lists, dropping empties and later duplicates."""
    seen: dict[str, None] = {}
    for group in groups:
        for region in group:
            if region and region not in seen:
                seen[region] = None
    return tuple(seen)


def split_region(region: str) -> list[str]:
    """``region`` may hold ``R1,R2``: the first is the default region."""
    return [piece.strip() for piece in region.split(",") if piece.strip()]


@dataclass
class _Sections:
    """Typed values per section, before clouds.yaml and region merging."""

    values: dict[str, dict[str, Any]]
    warnings: list[str]
    load_balancer: LoadBalancerConfig = field(default_factory=LoadBalancerConfig)


def _apply(stmts: list[gcfg.Statement], source: str) -> _Sections:
    values: dict[str, dict[str, Any]] = {name: {} for name in _SCHEMA}
    warnings: list[str] = []
    warned_sections: set[tuple[str, str | None]] = set()

    def warn(message: str) -> None:
        warnings.append(message)
        LOG.warning("%s", message)

    load_balancer = LoadBalancerConfig()
    for st in stmts:
        if st.section == "loadbalancer":
            if st.name is not None:
                try:
                    problem = set_option(load_balancer, st.subsection, st.name, st.value)
                except ValueError as exc:
                    raise ConfigError(f"{source}:{st.line}: [LoadBalancer] {st.name}: {exc}") from None
                if problem:
                    warn(f"{source}:{st.line}: {problem}")
            continue
        schema = _SCHEMA.get(st.section)
        if schema is None or st.subsection is not None:
            key = (st.section, st.subsection)
            if st.section not in _OTHER_OCCM_SECTIONS and key not in warned_sections:
                warned_sections.add(key)
                label = st.section if st.subsection is None else f'{st.section} "{st.subsection}"'
                warn(f"{source}:{st.line}: ignoring unknown section [{label}]")
            continue
        if st.name is None:
            continue
        if st.name not in schema:
            warn(f"{source}:{st.line}: ignoring unknown key {st.name!r} in section [{st.section}]")
            continue
        attr, kind = schema[st.name]
        try:
            _set(values[st.section], attr, kind, st.value)
        except ValueError as exc:
            raise ConfigError(f"{source}:{st.line}: [{st.section}] {st.name}: {exc}") from None
    return _Sections(values, warnings, load_balancer)


def _set(target: dict[str, Any], attr: str, kind: Kind, value: str | None) -> None:
    if kind is Kind.LIST:
        # A bare occurrence empties the list; each other occurrence appends one.
        target[attr] = [] if value is None else [*target.get(attr, []), value]
    elif kind is Kind.BOOL:
        target[attr] = parse_bool(value)
    elif value is None:
        raise ValueError("blank value not supported for type string")
    else:
        target[attr] = value


def _metadata(values: dict[str, Any]) -> MetadataOptions:
    order = values.get("search_order") or DEFAULT_SEARCH_ORDER
    check_metadata_search_order(order)
    timeout = DEFAULT_REQUEST_TIMEOUT
    if "request_timeout" in values:
        try:
            timeout = parse_duration(values["request_timeout"])
        except ValueError as exc:
            raise ConfigError(f"[Metadata] request-timeout: {exc}") from None
    return MetadataOptions(search_order=order, request_timeout=timeout)


def parse_config(text: str, source: str = "<config>", environ: Mapping[str, str] | None = None) -> CloudConfig:
    """Parse cloud.conf text; read clouds.yaml too if ``use-clouds`` is set."""
    try:
        stmts = gcfg.parse(text, source)
    except gcfg.GcfgSyntaxError as exc:
        raise ConfigError(str(exc)) from None
    sections = _apply(stmts, source)
    auth = AuthOptions(**sections.values["global"])
    cloud_regions: list[str] = []
    if auth.use_clouds:
        cloud_regions = apply_clouds_yaml(auth, os.environ if environ is None else environ, sections.warnings)
    head = split_region(auth.region)
    if head:
        auth.region = head[0]
    regions = merge_regions(head, auth.regions, cloud_regions)
    if not regions:
        raise ConfigError("no region configured: set [Global] region (and optionally regions)")
    return CloudConfig(
        global_=auth,
        networking=NetworkingOptions(**sections.values["networking"]),
        metadata=_metadata(sections.values["metadata"]),
        regions=regions,
        warnings=tuple(sections.warnings),
        load_balancer=sections.load_balancer,
    )


def load_config(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> CloudConfig:
    """Read the cloud.conf at ``path`` (OCCM's ``--cloud-config``)."""
    if not path:
        raise ConfigError("no OpenStack cloud provider config file given")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return parse_config(text, str(path), environ)


# clouds.yaml value -> AuthOptions field, after openstacksdk's own
# normalisation (it maps project_* / tenant_* and domain_name for us).
_CLOUD_AUTH_FIELDS = {
    "auth_url": "auth_url",
    "user_id": "user_id",
    "username": "username",
    "password": "password",
    "project_id": "tenant_id",
    "project_name": "tenant_name",
    "domain_id": "domain_id",
    "domain_name": "domain_name",
    "project_domain_id": "tenant_domain_id",
    "project_domain_name": "tenant_domain_name",
    "user_domain_id": "user_domain_id",
    "user_domain_name": "user_domain_name",
    "application_credential_id": "application_credential_id",
    "application_credential_name": "application_credential_name",
    "application_credential_secret": "application_credential_secret",
    "token": "token",
}
_CLOUD_TOP_FIELDS = {"interface": "endpoint_type", "cacert": "ca_file", "cert": "cert_file", "key": "key_file"}


def apply_clouds_yaml(auth: AuthOptions, environ: Mapping[str, str], warnings: list[str]) -> list[str]:
    """Fill empty ``auth`` fields from clouds.yaml; return its ``regions:``.

    Loading is openstacksdk's (file search, secure.yaml, profiles); only the
    choice of cloud and the OCCM rules (INI wins, region entries carrying
    their own ``auth`` are skipped) are ours.
    """
    from openstack import exceptions as sdk_exceptions
    from openstack.config import loader

    files = [auth.clouds_file] if auth.clouds_file else _default_clouds_files(environ)
    occ = loader.OpenStackConfig(config_files=files, load_envvars=False)
    if occ.config_filename is None:
        raise ConfigError(f"use-clouds is set but no clouds.yaml was found (searched {', '.join(files)})")
    clouds = occ.cloud_config.get("clouds", {})
    name = auth.cloud or environ.get("OS_CLOUD", "") or (next(iter(clouds)) if len(clouds) == 1 else "")
    if name not in clouds:
        raise ConfigError(f"cloud {name!r} not found in {occ.config_filename}" if name else
                          f"{occ.config_filename} has several clouds: set [Global] cloud or OS_CLOUD")
    raw = clouds[name]
    entries = _region_entries(raw.get("regions") or [], warnings)
    try:
        region = occ.get_one(cloud=name, validate=False, region_name=_sdk_region(raw, entries)).config
    except sdk_exceptions.ConfigException as exc:
        raise ConfigError(f"{occ.config_filename}: {exc}") from None
    values: dict[str, Any] = dict(region.get("auth") or {})
    values.update({k: region.get(k) for k in _CLOUD_TOP_FIELDS})
    for key, attr in {**_CLOUD_AUTH_FIELDS, **_CLOUD_TOP_FIELDS}.items():
        if not getattr(auth, attr) and values.get(key):
            setattr(auth, attr, str(values[key]))
    if not auth.region and isinstance(raw.get("region_name"), str):
        auth.region = raw["region_name"]
    return entries


def _default_clouds_files(environ: Mapping[str, str]) -> list[str]:
    from openstack.config import loader

    override = environ.get("OS_CLIENT_CONFIG_FILE")
    return ([override] if override else []) + list(loader.CONFIG_FILES)


def _region_entries(entries: list[Any], warnings: list[str]) -> list[str]:
    """Names of clouds.yaml ``regions:`` entries that share the one Keystone."""
    names: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            names.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            if "auth" in (entry.get("values") or {}):
                message = (
                    f"clouds.yaml region {entry['name']!r} has its own auth: only one Keystone is supported, skipped"
                )
                warnings.append(message)
                LOG.warning("%s", message)
            else:
                names.append(entry["name"])
        else:
            raise ConfigError(f"invalid clouds.yaml regions entry: {entry!r}")
    return names


def _sdk_region(raw: Mapping[str, Any], entries: list[str]) -> str | None:
    """A region for openstacksdk that is valid and has no auth override.

    openstacksdk merges the chosen ``regions:`` entry's values into the
    cloud; picking an entry without its own auth keeps the shared auth.
    """
    region_name = raw.get("region_name")
    if not raw.get("regions"):
        return region_name if isinstance(region_name, str) else None
    if isinstance(region_name, str) and region_name in entries:
        return region_name
    return entries[0] if entries else None
