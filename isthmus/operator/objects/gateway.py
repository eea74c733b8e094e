"""APIGateway: the Nova/Cinder gateway's objects."""


from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from isthmus.configs import ini, services
from isthmus.configs.ini import ISTHMUS_USER
from isthmus.operator import model
from isthmus.operator.objects import builders as b
from isthmus.operator.objects.region import region_endpoints

# --- APIGateway ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    region: str
    nova_url: str
    cinder_url: str
    az: str


def gateway_backends(gw: b.Obj, regions: Iterable[b.Obj]) -> list[Backend]:
    out = []
    for region in regions:
        rname = region["spec"]["name"]
        urls = region_endpoints(region)
        out.append(Backend(rname, urls["compute"].internal if "compute" in urls else "",
                           urls["volumev3"].internal if "volumev3" in urls else "",
                           region["spec"].get("availabilityZone", "")))
    return sorted(out, key=lambda backend: backend.region)


def gateway_endpoints(gw: b.Obj) -> b.Endpoints:
    spec = model.defaulted_spec("APIGateway", gw.get("spec"))
    return b.endpoints(spec, gw["metadata"]["name"], b.namespace_of(gw), b.GATEWAY_PORT, overrides=spec.get("service"))


def gateway_objects(gw: b.Obj, creds: b.Credentials, keystone: b.Endpoints, backends: list[Backend],
                    selected: Iterable[str]) -> list[b.Obj]:
    """The gateway for ``selected`` regions (its ``[gateway] regions``, ready or not: a
    region that is down stays behind the gateway, whose breakers handle it); ``backends``,
    the ready ones, only pick the default master region."""
    spec = model.defaulted_spec("APIGateway", gw.get("spec"))
    name, where = gw["metadata"]["name"], spec["regionName"]
    urls = gateway_endpoints(gw)
    user = b.service_user(spec, keystone, ISTHMUS_USER, creds.service_password, spec["centralRegionName"])
    values = services.GatewayValues(
        bind_host="0.0.0.0", bind_port=b.GATEWAY_PORT, public_url=urls.public, central_region=spec["centralRegionName"],
        master_region=spec.get("masterRegion") or (backends[0].region if backends else ""),
        database_connection=b.db_url(spec, creds, "isthmus"), service_user=user, list_timeout=None, catalog_ttl=None,
        interface="internal", placement_policy=spec.get("placementPolicy"), regions=tuple(sorted(selected)),
        tls=b.served_tls(spec))
    config = b.secret(gw, f"{name}-config", "isthmus-gateway",
                      {"gateway.conf": ini.render(ini.prune(services.gateway_conf(values)))}, where)
    pod = b.Pod("isthmus-gateway", b.image(spec, "isthmus"),
                ["isthmus-gateway", "--config-file", "/etc/isthmus/conf/gateway.conf"],
                config_secret=config["metadata"]["name"], config_dir="/etc/isthmus/conf", port=b.GATEWAY_PORT,
                extra_volumes=())
    out = [config, b.deployment(gw, name, pod, spec, spec["replicas"], [config], where),
           *b.service_pair(gw, name, "isthmus-gateway", b.GATEWAY_PORT, where, spec.get("service"))]
    if spec["nova"]:
        out.append(b.endpoint_registration(gw, spec, "compute", b.Endpoints(urls.public + "/compute/v2.1",
                                                                            urls.internal + "/compute/v2.1"), where))
    if spec["cinder"]:
        out.append(b.endpoint_registration(gw, spec, "volumev3", b.Endpoints(urls.public + "/volume/v3",
                                                                             urls.internal + "/volume/v3"), where))
    return out + b.disruption_budgets(gw, out)


