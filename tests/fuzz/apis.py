"""What each API accepts, read from the service's own schemas.

- Neutron: neutron-lib's (and neutron's) ``RESOURCE_ATTRIBUTE_MAP`` of networks,
  subnets, ports, security groups and rules with the extensions the sandbox
  loads, turned into a JSON schema per create and update;
- Nova and Cinder: their own JSON validation schemas (``nova.api.openstack.compute.schemas``,
  ``cinder.api.schemas``);
- the Admin API: its fields as docs/admin-api.md states them (it has no
  machine-readable spec; :data:`ADMIN_FIELDS` mirrors ``isthmus.admin.app``).

The services' schemas are read in a child process each (``python -m
tests.fuzz.apis neutron|nova|cinder`` prints them as JSON): Nova and Cinder
register the same oslo.config options and cannot be imported into one process,
and Neutron's imports start eventlet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.fuzz.generate import Api, Operation

REPO = Path(__file__).resolve().parents[2]

# --- Neutron --------------------------------------------------------------------------

NEUTRON_RESOURCES = {  # collection -> (body key, placeholder of its own ids)
    "networks": "network",
    "subnets": "subnet",
    "ports": "port",
    "security-groups": "security_group",
    "security-group-rules": "security_group_rule",
}
NEUTRON_EXTRA_COLLECTIONS = ("extensions", "availability_zones", "agents", "quotas", "subnetpools", "address-groups",
                             "network-ip-availabilities", "default-security-group-rules", "routers", "floatingips")
# Fields naming another object get a real one of the target (filled in per target).
REFERENCES = {"network_id": "{networks}", "subnet_id": "{subnets}", "security_group_id": "{security-groups}",
              "remote_group_id": "{security-groups}", "port_id": "{ports}"}

_NEUTRON_VALIDATORS: dict[str, dict[str, Any]] = {
    "type:uuid": {"type": "string", "format": "uuid"},
    "type:uuid_or_none": {"type": ["string", "null"], "format": "uuid"},
    "type:subnetpool_id_or_none": {"type": ["string", "null"], "format": "uuid"},
    "type:non_negative": {"type": "integer", "minimum": 0},
    "type:mac_address": {"type": "string", "format": "mac"},
    "type:ip_address_or_none": {"type": ["string", "null"], "format": "ipv4"},
    "type:ip_address": {"type": "string", "format": "ipv4"},
    "type:subnet_or_none": {"type": ["string", "null"], "format": "cidr"},
    "type:subnet": {"type": "string", "format": "cidr"},
    "type:fixed_ips": {"type": "array", "items": {"type": "object", "properties": {
        "subnet_id": {"enum": ["{subnets}"]}, "ip_address": {"type": "string", "format": "ipv4"}}}},
    "type:allowed_address_pairs": {"type": "array", "items": {"type": "object", "required": ["ip_address"],
                                                              "properties": {"ip_address": {"format": "ipv4",
                                                                                            "type": "string"},
                                                                             "mac_address": {"type": "string",
                                                                                             "format": "mac"}}}},
    "type:hostroutes": {"type": "array", "items": {"type": "object", "required": ["destination", "nexthop"],
                                                   "properties": {"destination": {"type": "string", "format": "cidr"},
                                                                  "nexthop": {"type": "string", "format": "ipv4"}}}},
    "type:nameservers": {"type": "array", "items": {"type": "string", "format": "ipv4"}},
    "type:ip_pools": {"type": "array", "items": {"type": "object", "required": ["start", "end"],
                                                 "properties": {"start": {"type": "string", "format": "ipv4"},
                                                                "end": {"type": "string", "format": "ipv4"}}}},
    "type:availability_zone_hint_list": {"type": "array", "items": {"enum": ["az1", "az2", "nova", "nowhere"]}},
    "type:dict_or_none": {"type": ["object", "null"]},
    "type:dict_or_empty": {"type": "object"},
    "type:list_of_any_key_specs_or_none": {"type": "array", "items": {"type": "object", "properties": {
        "opt_name": {"type": "string"}, "opt_value": {"type": "string"}, "ip_version": {"enum": [4, 6]}}}},
    "type:uuid_list": {"type": "array", "items": {"enum": ["{security-groups}"]}},
    "type:list_of_unique_strings": {"type": "array", "items": {"type": "string"}},
    "type:port_range": {"type": "string"},
}


def _neutron_attribute_schema(name: str, attr: Mapping[str, Any]) -> dict[str, Any]:
    if name in REFERENCES:
        return {"enum": [REFERENCES[name]]}
    if name == "security_groups":
        return {"type": "array", "items": {"enum": ["{security-groups}"]}}
    validate = attr.get("validate") or {}
    for kind, arg in validate.items():
        if kind in ("type:string", "type:name_string", "type:string_or_none"):
            schema: dict[str, Any] = {"type": "string"}
            if isinstance(arg, int):
                schema["maxLength"] = arg
            return schema
        if kind == "type:values" and arg:
            return {"enum": list(arg)}
        if kind == "type:range" and arg:
            return {"type": "integer", "minimum": arg[0], "maximum": arg[1]}
        if kind in _NEUTRON_VALIDATORS:
            return dict(_NEUTRON_VALIDATORS[kind])
    convert = getattr(attr.get("convert_to"), "__name__", "")
    if "boolean" in convert:
        return {"type": "boolean"}
    if "int" in convert:
        return {"type": "integer"}
    return {}


def neutron_schemas() -> dict[str, dict[str, Any]]:
    """{collection: {"create": schema, "update": schema}} of the sandbox's Neutron."""
    from neutron.extensions import securitygroup
    from neutron_lib.api.definitions import (
        allowedaddresspairs,
        extra_dhcp_opt,
        network,
        network_availability_zone,
        port,
        port_security,
        portbindings,
        provider_net,
        subnet,
    )

    maps: dict[str, dict[str, Any]] = {}
    for definition in (network, subnet, port, portbindings, port_security, provider_net, allowedaddresspairs,
                       extra_dhcp_opt, network_availability_zone):
        for collection, attrs in definition.RESOURCE_ATTRIBUTE_MAP.items():
            maps.setdefault(collection, {}).update(attrs)
    for collection, attrs in securitygroup.RESOURCE_ATTRIBUTE_MAP.items():
        maps.setdefault(collection, {}).update(attrs)
    out = {}
    for collection, key in NEUTRON_RESOURCES.items():
        attrs = maps[collection.replace("-", "_")]
        create = {n: _neutron_attribute_schema(n, a) for n, a in attrs.items() if a.get("allow_post")}
        required = [n for n, a in attrs.items() if a.get("allow_post") and "default" not in a]
        update = {n: _neutron_attribute_schema(n, a) for n, a in attrs.items() if a.get("allow_put")}
        out[collection] = {
            "create": _wrapped(key, {"type": "object", "properties": create, "required": required}),
            "update": _wrapped(key, {"type": "object", "properties": update}),
        }
    return out


def _wrapped(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {key: schema}, "required": [key], "additionalProperties": False}


def neutron_api(schemas: Mapping[str, Any]) -> Api:
    ops = []
    for collection in NEUTRON_RESOURCES:
        base = f"/v2.0/{collection}"
        ops += [
            Operation("POST", base, schemas[collection]["create"]),
            Operation("PUT", f"{base}/{{{collection}}}", schemas[collection]["update"]),
            Operation("PUT", f"{base}/{{id}}", schemas[collection]["update"]),
            Operation("GET", base),
            Operation("GET", f"{base}/{{{collection}}}"),
            Operation("GET", f"{base}/{{id}}"),
            Operation("DELETE", f"{base}/{{id}}"),
        ]
    return Api("neutron", tuple(ops),
               tuple(f"/v2.0/{c}" for c in (*NEUTRON_RESOURCES, *NEUTRON_EXTRA_COLLECTIONS)),
               query_keys=("id", "name", "network_id", "project_id", "tenant_id", "shared", "admin_state_up",
                           "fixed_ips", "device_owner", "security_group_id", "cidr", "tags"))


# --- Nova and Cinder ------------------------------------------------------------------

def nova_schemas() -> dict[str, Any]:
    from nova.api.openstack.compute.schemas import (
        flavors,
        keypairs,
        quota_sets,
        server_groups,
        server_metadata,
        servers,
        volume_attachments,
    )

    return {
        "servers.create": servers.create, "servers.update": servers.update, "servers.reboot": servers.reboot,
        "servers.resize": servers.resize, "servers.create_image": servers.create_image,
        "servers.rebuild": servers.rebuild, "keypairs.create": keypairs.create, "flavors.create": flavors.create,
        "server_groups.create": server_groups.create, "quota_sets.update": quota_sets.update,
        "server_metadata.create": server_metadata.create, "volume_attachments.create": volume_attachments.create,
    }


def nova_api(schemas: Mapping[str, Any]) -> Api:
    s = schemas
    ops = (
        Operation("POST", "/servers", s["servers.create"]),
        Operation("PUT", "/servers/{servers}", s["servers.update"]),
        Operation("PUT", "/servers/{id}", s["servers.update"]),
        Operation("POST", "/servers/{servers}/action", s["servers.reboot"]),
        Operation("POST", "/servers/{id}/action", s["servers.resize"]),
        Operation("POST", "/servers/{servers}/action", s["servers.create_image"]),
        Operation("POST", "/servers/{servers}/action", s["servers.rebuild"]),
        Operation("POST", "/servers/{servers}/metadata", s["server_metadata.create"]),
        Operation("POST", "/servers/{servers}/os-volume_attachments", s["volume_attachments.create"]),
        Operation("POST", "/os-keypairs", s["keypairs.create"]),
        Operation("POST", "/flavors", s["flavors.create"]),
        Operation("POST", "/os-server-groups", s["server_groups.create"]),
        Operation("PUT", "/os-quota-sets/{project}", s["quota_sets.update"]),
        Operation("GET", "/servers"),
        Operation("GET", "/servers/detail"),
        Operation("GET", "/flavors/detail"),
        Operation("GET", "/servers/{id}"),
    )
    return Api("nova", ops, ("/servers", "/servers/detail", "/flavors", "/os-keypairs", "/os-availability-zone",
                             "/os-server-groups", "/limits", "/os-quota-sets", "/images", "/os-hypervisors"),
               query_keys=("limit", "marker", "sort_key", "sort_dir", "name", "status", "changes-since",
                           "availability_zone", "all_tenants", "flavor", "image"))


def cinder_schemas() -> dict[str, Any]:
    from cinder.api.schemas import backups, snapshots, volume_actions, volume_metadata, volumes

    return {
        "volumes.create": volumes.create, "volumes.update": volumes.update, "volumes.extend": volume_actions.extend,
        "volumes.set_bootable": volume_actions.set_bootable, "volumes.retype": volume_actions.retype,
        "snapshots.create": snapshots.create, "backups.create": backups.create,
        "metadata.create": volume_metadata.create,
    }


def cinder_api(schemas: Mapping[str, Any]) -> Api:
    s = schemas
    ops = (
        Operation("POST", "/volumes", s["volumes.create"]),
        Operation("PUT", "/volumes/{volumes}", s["volumes.update"]),
        Operation("PUT", "/volumes/{id}", s["volumes.update"]),
        Operation("POST", "/volumes/{volumes}/action", s["volumes.extend"]),
        Operation("POST", "/volumes/{volumes}/action", s["volumes.set_bootable"]),
        Operation("POST", "/volumes/{id}/action", s["volumes.retype"]),
        Operation("POST", "/volumes/{volumes}/metadata", s["metadata.create"]),
        Operation("POST", "/snapshots", s["snapshots.create"]),
        Operation("POST", "/backups", s["backups.create"]),
        Operation("GET", "/volumes/detail"),
        Operation("GET", "/volumes/{id}"),
    )
    return Api("cinder", ops, ("/volumes", "/volumes/detail", "/snapshots", "/backups", "/types",
                               "/os-quota-sets", "/limits", "/os-availability-zone"),
               query_keys=("limit", "marker", "sort", "sort_key", "sort_dir", "name", "status", "all_tenants",
                           "availability_zone", "offset"))


# --- the Admin API --------------------------------------------------------------------

_TEXT = {"type": "string", "maxLength": 255}
ADMIN_FIELDS = {  # docs/admin-api.md; what isthmus.admin.app accepts
    "pod": {"properties": {"region_name": _TEXT, "az_name": _TEXT, "pod_az_name": _TEXT, "dc_name": _TEXT},
            "required": ["region_name"]},
    "routing": {"properties": {"top_id": _TEXT, "bottom_id": _TEXT, "pod_id": {"enum": ["{pods}"]},
                               "project_id": _TEXT,
                               "resource_type": {"enum": ["network", "subnet", "port", "server", "volume"]}},
                "required": ["top_id", "bottom_id", "pod_id", "project_id", "resource_type"]},
    "binding": {"properties": {"project_id": _TEXT, "pod_id": {"enum": ["{pods}"]}},
                "required": ["project_id", "pod_id"]},
    "job": {"properties": {"type": {"enum": ["shadow_port", "network_update", "plain", "unknown"]},
                           "project_id": _TEXT,
                           "resource": {"type": "object", "properties": {"pod_id": {"enum": ["{pods}"]},
                                                                         "port_id": _TEXT, "network_id": _TEXT,
                                                                         "resource_id": _TEXT}}},
            "required": ["type", "project_id", "resource"]},
}


def admin_api() -> Api:
    def body(key: str) -> dict[str, Any]:
        return _wrapped(key, {"type": "object", **ADMIN_FIELDS[key]})

    ops = []
    for collection, key in (("pods", "pod"), ("routings", "routing"), ("bindings", "binding"), ("jobs", "job")):
        base = f"/v1.0/{collection}"
        ops += [Operation("POST", base, body(key)), Operation("GET", base), Operation("GET", f"{base}/{{id}}"),
                Operation("GET", f"{base}/{{{collection}}}"), Operation("DELETE", f"{base}/{{id}}")]
    ops += [Operation("PUT", "/v1.0/routings/{routings}", _wrapped("routing", {"type": "object", "properties":
                                                                              ADMIN_FIELDS["routing"]["properties"]})),
            Operation("PUT", "/v1.0/routings/{id}", body("routing")), Operation("PUT", "/v1.0/jobs/{id}"),
            Operation("GET", "/v1.0/jobs/detail"), Operation("GET", "/v1.0/jobs/schemas")]
    return Api("admin", tuple(ops), ("/v1.0/pods", "/v1.0/routings", "/v1.0/bindings", "/v1.0/jobs", "/v1.0", "/"),
               query_keys=("id", "top_id", "bottom_id", "pod_id", "project_id", "resource_type", "type", "status",
                           "resource_id"),
               admin_share=0.9)


# --- reading the schemas in child processes -------------------------------------------

READERS = {"neutron": neutron_schemas, "nova": nova_schemas, "cinder": cinder_schemas}


def read_schemas(services: tuple[str, ...] = ("neutron", "nova", "cinder"), timeout: float = 300) -> dict[str, Any]:
    """{service: schemas}, each read by ``python -m tests.fuzz.apis SERVICE``, concurrently."""
    def read(service: str) -> Any:
        done = subprocess.run([sys.executable, "-m", "tests.fuzz.apis", service], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
        if done.returncode != 0:
            raise RuntimeError(f"reading {service}'s schemas failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout)

    with ThreadPoolExecutor(len(services)) as pool:
        return dict(zip(services, pool.map(read, services), strict=True))


def _main(service: str) -> None:
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    print(json.dumps(READERS[service](), default=str))


if __name__ == "__main__":
    _main(sys.argv[1])
