"""Region: one OpenStack region's objects (Neutron with the local plugin, Nova, Placement, Cinder)."""


from __future__ import annotations

from dataclasses import replace
from typing import Any

from isthmus.configs import compute, ini, neutron
from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.operator import model
from isthmus.operator.objects import builders as b

# --- Region ----------------------------------------------------------------------------------------------------------

def region_endpoints(region: b.Obj) -> dict[str, b.Endpoints]:
    """Service type -> URLs of a region's APIs (the ones it serves or registers)."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    name, ns = region["metadata"]["name"], b.namespace_of(region)
    out: dict[str, b.Endpoints] = {}
    existing = spec.get("existingControlPlane")
    if existing:
        given = existing.get("neutronURL") or {}
        where = existing.get("namespace") or ns
        out["network"] = b.Endpoints(given.get("public") or f"http://neutron-public.{where}.svc:{b.NEUTRON_PORT}",
                                     given.get("internal") or f"http://neutron-internal.{where}.svc:{b.NEUTRON_PORT}")
    else:
        out["network"] = b.endpoints(spec, f"{name}-neutron", ns, b.NEUTRON_PORT, overrides=spec.get("service"))
    for service_type, key, port, path in (("compute", "nova", b.NOVA_PORT, "/v2.1"),
                                          ("volumev3", "cinder", b.CINDER_PORT, "/v3")):
        section = spec[key]
        if not section["enabled"]:
            continue
        if section["mode"] == "External":
            urls = section["externalEndpoints"]
            out[service_type] = b.Endpoints(urls["public"], urls["internal"])
        else:
            out[service_type] = b.endpoints(spec, f"{name}-{key}", ns, port, path, spec.get("service"))
    return out


def vni_range(index: int) -> str:
    """As the sandbox: central 1:99999, region i (1-based) 100000*i:100000*i+99999."""
    start = 100000 * (index + 1)
    return f"{start}:{start + 99999}"


def region_neutron_values(region: b.Obj, creds: b.Credentials, keystone: b.Endpoints) -> neutron.NeutronValues:
    spec = model.defaulted_spec("Region", region.get("spec"))
    name = spec["name"]
    n = spec["neutron"]
    user = b.service_user(spec, keystone, "neutron", creds.service_password, name)
    cross = n["crossRegion"]["enabled"]
    return neutron.NeutronValues(
        role=neutron.LOCAL if cross else neutron.PLAIN,
        region=name,
        central_region=spec["centralRegionName"],
        service_user=user,
        database_connection=b.db_url(spec, creds, f"neutron_{name.lower()}"),
        transport_url=creds.transport(name),
        central_client=b.service_user(spec, keystone, ISTHMUS_USER, creds.service_password, name)
        if cross else None,
        availability_zone=spec.get("availabilityZone") or f"az{spec['index'] + 1}",
        mechanism_drivers=",".join(n.get("ml2MechanismDrivers") or ["openvswitch"]),
        vni_ranges=",".join(n.get("vniRanges") or [vni_range(spec["index"])]),
        network_vlan_ranges=",".join(n.get("networkVlanRanges") or ["physnet1:100:2999"]),
        host=f"neutron-{name}",
        state_path="/var/lib/neutron",
        lock_path="/var/lib/neutron/lock",
    )


# Schema (and, for Nova, the cell mappings: cell0 in ``<database>_cell0``, one cell1)
# before the API starts; each step is a no-op when already done, so the Job can rerun.
DB_SYNC = {
    "nova": "m='nova-manage --config-file {conf}'; $m api_db sync; $m cell_v2 map_cell0; "
            "$m cell_v2 list_cells | grep -q ' cell1 ' || $m cell_v2 create_cell --name cell1; $m db sync",
    "cinder": "cinder-manage --config-file {conf} db sync",
}


def compute_conf(key: str, spec: b.Obj, creds: b.Credentials, user: ServiceUser, rname: str) -> ini.Sections:
    """nova.conf or cinder.conf of a region's API (mode Deploy), from the renderer the sandbox uses."""
    zone = spec.get("availabilityZone") or f"az{spec['index'] + 1}"
    if key == "nova":
        return compute.nova_conf(compute.NovaValues(
            transport_url=creds.transport(rname),
            database_connection=b.db_url(spec, creds, f"nova_{rname.lower()}"),
            api_database_connection=b.db_url(spec, creds, f"nova_api_{rname.lower()}"),
            service_user=user, availability_zone=zone))
    return compute.cinder_conf(compute.CinderValues(
        transport_url=creds.transport(rname), database_connection=b.db_url(spec, creds, f"cinder_{rname.lower()}"),
        service_user=user, availability_zone=zone))


def region_objects(region: b.Obj, creds: b.Credentials, keystone: b.Endpoints) -> list[b.Obj]:
    """Neutron (unless an existing control plane serves the region), optional Nova/Cinder APIs,
    and one EndpointRegistration per service type."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    name, rname = region["metadata"]["name"], spec["name"]
    out: list[b.Obj] = []
    urls = region_endpoints(region)
    if not spec.get("existingControlPlane"):
        values = region_neutron_values(region, creds, keystone)
        files = {"neutron.conf": ini.render(neutron.neutron_conf(values)),
                 "ml2_conf.ini": ini.render(neutron.ml2_conf(values))}
        if spec["neutron"].get("customServiceConfig"):
            files["custom.conf"] = spec["neutron"]["customServiceConfig"]
        config = b.secret(region, f"{name}-neutron-config", "neutron", files, rname)
        conf_dir = "/etc/neutron/conf"
        pod = b.Pod("neutron", b.image(spec, "neutron"), [], config_secret=config["metadata"]["name"],
                    config_dir=conf_dir, env=(("OS_NEUTRON_CONFIG_DIR", conf_dir),
                                              ("OS_NEUTRON_CONFIG_FILES", ";".join(files))))
        conf_args = [arg for file in files for arg in ("--config-file", f"{conf_dir}/{file}")]
        out += [config,
                b.job(region, b.schema_job_name(f"{name}-neutron-db-sync", spec),
                      replace(pod, command=["neutron-db-manage", *conf_args, "upgrade", "heads"]), spec, [config],
                      rname),
                b.deployment(region, f"{name}-neutron",
                             replace(pod, command=b.gunicorn("neutron.wsgi.api:application", b.NEUTRON_PORT, spec),
                                     port=b.NEUTRON_PORT),
                             spec, spec["neutron"]["replicas"], [config], rname,
                             networks=spec["neutron"].get("networkAttachments")),
                *b.service_pair(region, f"{name}-neutron", "neutron", b.NEUTRON_PORT, rname, spec.get("service"))]
    for key, port, app in (("nova", b.NOVA_PORT, "nova.wsgi.osapi_compute:application"),
                           ("cinder", b.CINDER_PORT, "cinder.wsgi.api:application")):
        section = spec[key]
        if not section["enabled"] or section["mode"] != "Deploy":
            continue
        user = b.service_user(spec, keystone, key, creds.service_password, rname)
        conf = compute_conf(key, spec, creds, user, rname)
        config = b.secret(region, f"{name}-{key}-config", key, {f"{key}.conf": ini.render(ini.prune(conf))}, rname)
        pod = b.Pod(f"{key}-api", b.image(spec, key), b.gunicorn(app, port, spec),
                    config_secret=config["metadata"]["name"], config_dir=f"/etc/{key}/conf",
                    env=((f"OS_{key.upper()}_CONFIG_DIR", f"/etc/{key}/conf"),), port=port)
        sync = replace(pod, command=["sh", "-ec", DB_SYNC[key].format(conf=f"/etc/{key}/conf/{key}.conf")], port=None)
        out += [config, b.job(region, b.schema_job_name(f"{name}-{key}-db-sync", spec), sync, spec, [config], rname),
                b.deployment(region, f"{name}-{key}-api", pod, spec, section["replicas"], [config], rname),
                *b.service_pair(region, f"{name}-{key}", f"{key}-api", port, rname, spec.get("service"))]
    # The one Keystone is catalogued in every region too, as the sandbox does, so
    # clients pinned to any region find identity in their catalogue.
    out.append(b.endpoint_registration(region, spec, "identity", keystone, rname))
    for service_type, url in urls.items():
        if service_type == "network" and spec.get("existingControlPlane"):
            continue  # the deploying operator registers its own Neutron
        out.append(b.endpoint_registration(region, spec, service_type, url, rname))
    return out + b.disruption_budgets(region, out)


def custom_service_config(region: b.Obj, creds: b.Credentials, keystone: b.Endpoints) -> str:
    """The customServiceConfig snippet for an existing OpenStackControlPlane's Neutron (RHOSO)."""
    return neutron.custom_service_config(region_neutron_values(region, creds, keystone))


def control_plane_patch(snippet: str) -> dict[str, Any]:
    """Merge patch of an OpenStackControlPlane: the local plugin into its Neutron template."""
    return {"spec": {"neutron": {"template": {"customServiceConfig": snippet}}}}


