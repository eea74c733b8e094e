"""CentralNetwork: central Neutron, the Admin API, the job workers, the registry's pods."""


from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from isthmus.configs import ini, neutron, services
from isthmus.configs.ini import ISTHMUS_USER
from isthmus.operator import model
from isthmus.operator.objects import builders as b

# --- CentralNetwork --------------------------------------------------------------------------------------------------

def central_endpoints(cnet: b.Obj) -> tuple[b.Endpoints, str]:
    """(central Neutron URLs, Admin API URL)."""
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    name, ns = cnet["metadata"]["name"], b.namespace_of(cnet)
    return (b.endpoints(spec, f"{name}-neutron", ns, b.NEUTRON_PORT),
            b.service_url(spec, f"{name}-admin-api", ns, spec["adminAPI"]["port"]))


def central_objects(cnet: b.Obj, creds: b.Credentials, keystone: b.Endpoints,
                    registered: Iterable[tuple[str, str]] = ()) -> list[b.Obj]:
    """Central Neutron, the Admin API and xjob, their Services, schema Jobs, the
    Admin API's registration and a Job registering ``registered`` (region, AZ) pods."""
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    name, central = cnet["metadata"]["name"], spec["centralRegionName"]
    isthmus_db = b.db_url(spec, creds, "isthmus", spec)
    user = b.service_user(spec, keystone, "neutron", creds.service_password, central)
    isthmus_user = b.service_user(spec, keystone, ISTHMUS_USER, creds.service_password, central)
    values = neutron.NeutronValues(
        role=neutron.CENTRAL, region=central, central_region=central, service_user=user,
        database_connection=b.db_url(spec, creds, "neutron_central", spec), transport_url=creds.transport(central),
        isthmus_database_connection=isthmus_db,
        type_drivers=",".join(spec.get("typeDrivers") or ["flat", "vlan", "vxlan"]),
        tenant_network_types=",".join(spec.get("tenantNetworkTypes") or ["vxlan"]),
        vni_ranges=",".join(spec.get("vniRanges") or ["1:99999"]),
        flat_networks=",".join(spec.get("flatNetworks") or ["*"]),
        network_vlan_ranges=",".join(spec.get("networkVlanRanges") or ["physnet1:100:2999"]),
        host=f"neutron-{central}", state_path="/var/lib/neutron", lock_path="/var/lib/neutron/lock")
    neutron_files = {"neutron.conf": ini.render(neutron.neutron_conf(values)),
                     "ml2_conf.ini": ini.render(neutron.ml2_conf(values))}
    n_config = b.secret(cnet, f"{name}-neutron-config", "neutron", neutron_files, central)
    admin_port = spec["adminAPI"]["port"]
    a_config = b.secret(cnet, f"{name}-admin-api-config", "isthmus-admin", {"admin-api.conf": ini.render(
        services.admin_api_conf(services.AdminAPIValues("0.0.0.0", admin_port, isthmus_db, isthmus_user,
                                                        tls=b.served_tls(spec))))}, central)
    x_config = b.secret(cnet, f"{name}-xjob-config", "isthmus-xjob", {"xjob.conf": ini.render(ini.prune(
        services.xjob_conf(services.XJobValues(
            isthmus_db, central, isthmus_user, metrics_port=b.XJOB_METRICS_PORT, metrics_bind_host="0.0.0.0",
            gateway_master_region=(spec.get("xjob") or {}).get("gatewayMasterRegion"))))), }, central)
    conf_dir = "/etc/neutron/conf"
    n_pod = b.Pod("neutron", b.image(spec, "neutron"), [], config_secret=f"{name}-neutron-config", config_dir=conf_dir,
                  env=(("OS_NEUTRON_CONFIG_DIR", conf_dir), ("OS_NEUTRON_CONFIG_FILES", "neutron.conf;ml2_conf.ini")))
    conf_args = ["--config-file", f"{conf_dir}/neutron.conf", "--config-file", f"{conf_dir}/ml2_conf.ini"]
    i_dir = "/etc/isthmus/conf"
    admin_pod = b.Pod("isthmus-admin", b.image(spec, "isthmus"),
                      ["isthmus-admin", "--config-file", f"{i_dir}/admin-api.conf"],
                      config_secret=f"{name}-admin-api-config", config_dir=i_dir, port=admin_port)
    xjob_pod = b.Pod("isthmus-xjob", b.image(spec, "isthmus"), ["isthmus-xjob", "--config-file", f"{i_dir}/xjob.conf"],
                     config_secret=f"{name}-xjob-config", config_dir=i_dir, metrics_port=b.XJOB_METRICS_PORT)
    # The registry's URL holds the database password: the Jobs read it from a Secret, not
    # from a plain env value in their (widely readable) spec.
    db_secret = b.secret(cnet, f"{name}-isthmus-db", "isthmus-db", {"url": isthmus_db}, central)
    db_env = registry_url_env(cnet)
    db_pod = b.Pod("isthmus-db", b.image(spec, "isthmus"),
                   ["sh", "-c", 'isthmus db upgrade --db-url "$ISTHMUS_DB_URL"'], secret_env=db_env)
    neutron_urls, admin_url = central_endpoints(cnet)
    out = [
        n_config, a_config, x_config, db_secret,
        b.job(cnet, b.schema_job_name(f"{name}-isthmus-db-sync", spec), db_pod, spec, [], central),
        b.job(cnet, b.schema_job_name(f"{name}-neutron-db-sync", spec),
              replace(n_pod, command=["neutron-db-manage", *conf_args, "upgrade", "heads"]), spec, [n_config], central),
        b.deployment(cnet, f"{name}-neutron",
                     replace(n_pod, command=b.gunicorn("neutron.wsgi.api:application", b.NEUTRON_PORT, spec),
                             port=b.NEUTRON_PORT),
                     spec, spec["replicas"], [n_config], central),
        b.deployment(cnet, f"{name}-admin-api", admin_pod, spec, spec["adminAPI"]["replicas"], [a_config], central),
        b.deployment(cnet, f"{name}-xjob", xjob_pod, spec, spec["xjob"]["replicas"], [x_config], central),
        *b.service_pair(cnet, f"{name}-neutron", "neutron", b.NEUTRON_PORT, central, None),
        b.service(cnet, f"{name}-admin-api", "isthmus-admin", admin_port, central),
        b.endpoint_registration(cnet, spec, "network", neutron_urls, central),
        b.endpoint_registration(cnet, spec, "multiregion", b.Endpoints(admin_url, admin_url), central),
    ]
    pods = sorted(set(registered))
    if pods:
        out.append(pods_job(cnet, spec, pods, db_env, central))
    return out + b.disruption_budgets(cnet, out)


def registry_url_env(cnet: b.Obj) -> tuple[tuple[str, str, str], ...]:
    """``ISTHMUS_DB_URL`` from the CentralNetwork's ``<cnet>-isthmus-db`` Secret (its Jobs' and
    the remove-pod Job's)."""
    return (("ISTHMUS_DB_URL", f"{cnet['metadata']['name']}-isthmus-db", "url"),)


def pods_job(cnet: b.Obj, spec: Mapping[str, Any], pods: list[tuple[str, str]],
             db_env: tuple[tuple[str, str, str], ...], central: str) -> b.Obj:
    """Registers the central pod and the regions' pods in the Isthmus registry; the Job's
    name carries the hash of the list, so a new list is a new Job (Jobs are immutable)."""
    args = [f"{central}:"] + [f"{region}:{az}" for region, az in pods]
    digest = hashlib.sha256(json.dumps(args).encode()).hexdigest()[:8]
    pod = b.Pod("isthmus-pods", b.image(spec, "isthmus"),
                ["sh", "-c", 'exec isthmus operator ensure-pods --db-url "$ISTHMUS_DB_URL" "$@"', "ensure-pods", *args],
                secret_env=db_env)
    out = b.job(cnet, f"{cnet['metadata']['name']}-pods-{digest}", pod, spec, [], central)
    out["metadata"]["labels"]["isthmus.dev/pods-job"] = "true"
    return out


def remove_pod_job(region: b.Obj, cnet: b.Obj) -> b.Obj:
    """Removes a deleted Region's pod from the Isthmus registry (``isthmus operator
    remove-pod``), with the registry URL of its CentralNetwork. Owned by the Region
    (whose finalizer waits for it), named with its uid (a later namesake is another
    Region); retried by Kubernetes with its capped back-off while the region still holds
    users' objects, the reason in the container's termination message."""
    spec = model.defaulted_spec("CentralNetwork", cnet.get("spec"))
    rname = region["spec"]["name"]
    uid = (region["metadata"].get("uid") or "")[:8]
    pod = b.Pod("isthmus-remove-pod", b.image(spec, "isthmus"),
                ["sh", "-c", 'exec isthmus operator remove-pod --db-url "$ISTHMUS_DB_URL" "$1"', "remove-pod", rname],
                secret_env=registry_url_env(cnet))
    out = b.job(region, f"{region['metadata']['name']}-remove-pod" + (f"-{uid}" if uid else ""), pod, spec, [], rname)
    out["spec"]["backoffLimit"] = REMOVE_POD_RETRIES
    container = out["spec"]["template"]["spec"]["containers"][0]
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"  # the "still holds ..." line
    return out


REMOVE_POD_RETRIES = 100  # Kubernetes' back-off caps at 6 min: days of waiting for a region to drain


