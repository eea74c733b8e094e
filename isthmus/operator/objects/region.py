"""Region: one OpenStack region's objects (Neutron with the local plugin, Nova, Placement, Cinder)."""


from __future__ import annotations

from dataclasses import replace
from typing import Any

from isthmus.configs import compute, ini, neutron
from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.operator import model
from isthmus.operator.objects.builders import (
    CINDER_PORT,
    NEUTRON_PORT,
    NOVA_PORT,
    Credentials,
    Endpoints,
    Obj,
    Pod,
    db_url,
    deployment,
    disruption_budgets,
    endpoint_registration,
    endpoints,
    gunicorn,
    image,
    job,
    namespace_of,
    schema_job_name,
    secret,
    service_pair,
    service_user,
)

# --- Region ----------------------------------------------------------------------------------------------------------

def region_endpoints(region: Obj) -> dict[str, Endpoints]:
    """Service type -> URLs of a region's APIs (the ones it serves or registers)."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    name, ns = region["metadata"]["name"], namespace_of(region)
    out: dict[str, Endpoints] = {}
    existing = spec.get("existingControlPlane")
    if existing:
        given = existing.get("neutronURL") or {}
        where = existing.get("namespace") or ns
        out["network"] = Endpoints(given.get("public") or f"http://neutron-public.{where}.svc:{NEUTRON_PORT}",
                                   given.get("internal") or f"http://neutron-internal.{where}.svc:{NEUTRON_PORT}")
    else:
        out["network"] = endpoints(spec, f"{name}-neutron", ns, NEUTRON_PORT, overrides=spec.get("service"))
    for service_type, key, port, path in (("compute", "nova", NOVA_PORT, "/v2.1"),
                                          ("volumev3", "cinder", CINDER_PORT, "/v3")):
        section = spec[key]
        if not section["enabled"]:
            continue
        if section["mode"] == "External":
            urls = section["externalEndpoints"]
            out[service_type] = Endpoints(urls["public"], urls["internal"])
        else:
            out[service_type] = endpoints(spec, f"{name}-{key}", ns, port, path, spec.get("service"))
    return out


def vni_range(index: int) -> str:
    """As the sandbox: central 1:99999, region i (1-based) 100000*i:100000*i+99999."""
    start = 100000 * (index + 1)
    return f"{start}:{start + 99999}"


def region_neutron_values(region: Obj, creds: Credentials, keystone: Endpoints) -> neutron.NeutronValues:
    spec = model.defaulted_spec("Region", region.get("spec"))
    name = spec["name"]
    n = spec["neutron"]
    user = service_user(spec, keystone, "neutron", creds.service_password, name)
    cross = n["crossRegion"]["enabled"]
    return neutron.NeutronValues(
        role=neutron.LOCAL if cross else neutron.PLAIN,
        region=name,
        central_region=spec["centralRegionName"],
        service_user=user,
        database_connection=db_url(spec, creds, f"neutron_{name.lower()}"),
        transport_url=creds.transport(name),
        central_client=service_user(spec, keystone, ISTHMUS_USER, creds.service_password, name)
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


def compute_conf(key: str, spec: Obj, creds: Credentials, user: ServiceUser, rname: str) -> ini.Sections:
    """nova.conf or cinder.conf of a region's API (mode Deploy), from the renderer the sandbox uses."""
    zone = spec.get("availabilityZone") or f"az{spec['index'] + 1}"
    if key == "nova":
        return compute.nova_conf(compute.NovaValues(
            transport_url=creds.transport(rname),
            database_connection=db_url(spec, creds, f"nova_{rname.lower()}"),
            api_database_connection=db_url(spec, creds, f"nova_api_{rname.lower()}"),
            service_user=user, availability_zone=zone))
    return compute.cinder_conf(compute.CinderValues(
        transport_url=creds.transport(rname), database_connection=db_url(spec, creds, f"cinder_{rname.lower()}"),
        service_user=user, availability_zone=zone))


def region_objects(region: Obj, creds: Credentials, keystone: Endpoints) -> list[Obj]:
    """Neutron (unless an existing control plane serves the region), optional Nova/Cinder APIs,
    and one EndpointRegistration per service type."""
    spec = model.defaulted_spec("Region", region.get("spec"))
    name, rname = region["metadata"]["name"], spec["name"]
    out: list[Obj] = []
    urls = region_endpoints(region)
    if not spec.get("existingControlPlane"):
        values = region_neutron_values(region, creds, keystone)
        files = {"neutron.conf": ini.render(neutron.neutron_conf(values)),
                 "ml2_conf.ini": ini.render(neutron.ml2_conf(values))}
        if spec["neutron"].get("customServiceConfig"):
            files["custom.conf"] = spec["neutron"]["customServiceConfig"]
        config = secret(region, f"{name}-neutron-config", "neutron", files, rname)
        conf_dir = "/etc/neutron/conf"
        pod = Pod("neutron", image(spec, "neutron"), [], config_secret=config["metadata"]["name"],
                  config_dir=conf_dir, env=(("OS_NEUTRON_CONFIG_DIR", conf_dir),
                                            ("OS_NEUTRON_CONFIG_FILES", ";".join(files))))
        conf_args = [arg for file in files for arg in ("--config-file", f"{conf_dir}/{file}")]
        out += [config,
                job(region, schema_job_name(f"{name}-neutron-db-sync", spec),
                    replace(pod, command=["neutron-db-manage", *conf_args, "upgrade", "heads"]), spec, [config],
                    rname),
                deployment(region, f"{name}-neutron",
                           replace(pod, command=gunicorn("neutron.wsgi.api:application", NEUTRON_PORT, spec),
                                    port=NEUTRON_PORT),
                           spec, spec["neutron"]["replicas"], [config], rname,
                           networks=spec["neutron"].get("networkAttachments")),
                *service_pair(region, f"{name}-neutron", "neutron", NEUTRON_PORT, rname, spec.get("service"))]
    for key, port, app in (("nova", NOVA_PORT, "nova.wsgi.osapi_compute:application"),
                           ("cinder", CINDER_PORT, "cinder.wsgi.api:application")):
        section = spec[key]
        if not section["enabled"] or section["mode"] != "Deploy":
            continue
        user = service_user(spec, keystone, key, creds.service_password, rname)
        conf = compute_conf(key, spec, creds, user, rname)
        config = secret(region, f"{name}-{key}-config", key, {f"{key}.conf": ini.render(ini.prune(conf))}, rname)
        pod = Pod(f"{key}-api", image(spec, key), gunicorn(app, port, spec), config_secret=config["metadata"]["name"],
                  config_dir=f"/etc/{key}/conf", env=((f"OS_{key.upper()}_CONFIG_DIR", f"/etc/{key}/conf"),),
                  port=port)
        sync = replace(pod, command=["sh", "-ec", DB_SYNC[key].format(conf=f"/etc/{key}/conf/{key}.conf")], port=None)
        out += [config, job(region, schema_job_name(f"{name}-{key}-db-sync", spec), sync, spec, [config], rname),
                deployment(region, f"{name}-{key}-api", pod, spec, section["replicas"], [config], rname),
                *service_pair(region, f"{name}-{key}", f"{key}-api", port, rname, spec.get("service"))]
    # The one Keystone is catalogued in every region too, as the sandbox does, so
    # clients pinned to any region find identity in their catalogue.
    out.append(endpoint_registration(region, spec, "identity", keystone, rname))
    for service_type, url in urls.items():
        if service_type == "network" and spec.get("existingControlPlane"):
            continue  # the deploying operator registers its own Neutron
        out.append(endpoint_registration(region, spec, service_type, url, rname))
    return out + disruption_budgets(region, out)


def custom_service_config(region: Obj, creds: Credentials, keystone: Endpoints) -> str:
    """The customServiceConfig snippet for an existing OpenStackControlPlane's Neutron (RHOSO)."""
    return neutron.custom_service_config(region_neutron_values(region, creds, keystone))


def control_plane_patch(snippet: str) -> dict[str, Any]:
    """Merge patch of an OpenStackControlPlane: the local plugin into its Neutron template."""
    return {"spec": {"neutron": {"template": {"customServiceConfig": snippet}}}}


