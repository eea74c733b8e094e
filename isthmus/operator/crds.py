"""The CustomResourceDefinitions of group ``isthmus.dev``, version ``v1alpha1``.

Built in Python so the schema, its defaults and its CEL rules live next to the
code that reads them; ``isthmus operator crds`` prints them and
deploy/operator/crds.yaml is their checked-in output (a unit test keeps the two
equal). Design: docs/operator.md and the reference design it follows.
"""

from __future__ import annotations

from typing import Any

from isthmus.operator import GROUP, VERSION
from isthmus.operator.fernet import DURATION_PATTERN

Schema = dict[str, Any]

DEFAULT_CENTRAL_REGION = "CentralRegion"
DEFAULT_IDENTITY_REGION = "CentralRegion"
ADMIN_API_PORT = 19999


# --- schema building blocks ------------------------------------------------------------------------------------------

def string(description: str = "", default: str | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "string", **extra}
    if description:
        schema["description"] = description
    if default is not None:
        schema["default"] = default
    return schema


def boolean(description: str, default: bool) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def integer(description: str, default: int | None = None, minimum: int | None = 0) -> Schema:
    schema: Schema = {"type": "integer", "format": "int32", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    if default is not None:
        schema["default"] = default
    return schema


def strings(description: str) -> Schema:
    return {"type": "array", "description": description, "items": {"type": "string"}}


def string_map(description: str) -> Schema:
    return {"type": "object", "description": description, "additionalProperties": {"type": "string"}}


def obj(properties: dict[str, Schema], description: str = "", required: list[str] | None = None,
        rules: list[tuple[str, str]] | None = None, default: dict | None = None) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if description:
        schema["description"] = description
    if required:
        schema["required"] = required
    if rules:
        schema["x-kubernetes-validations"] = [{"rule": rule, "message": message} for rule, message in rules]
    if default is not None:
        # An empty default object lets the nested defaults apply when the section is omitted.
        schema["default"] = default
    return schema


def replicas(default: int = 1) -> Schema:
    return integer("Pods of this service (0 stops it).", default=default, minimum=0)


def region_name(description: str, default: str | None = None) -> Schema:
    return string(description, default=default, pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$", maxLength=64)


SECRET_REF = obj({"name": string("Secret name, in the resource's namespace.")}, required=["name"])

SERVICE_OVERRIDE = obj({
    "type": string("Service type.", default="ClusterIP", enum=["ClusterIP", "NodePort", "LoadBalancer"]),
    "annotations": string_map("Extra Service annotations (MetalLB pools, ...)."),
    "loadBalancerIP": string("Requested load-balancer address."),
    "endpointURL": string("The URL to advertise instead of the Service's DNS name."),
})

SERVICE_OVERRIDES = obj({"public": SERVICE_OVERRIDE, "internal": SERVICE_OVERRIDE},
                        "Overrides of the public and internal Services.")

ENDPOINTS = obj({"public": string("Public URL."), "internal": string("Internal URL.")})

CONDITION = obj({
    "type": string("CamelCase condition type; Ready summarises the others."),
    "status": string("", enum=["True", "False", "Unknown"]),
    "reason": string("CamelCase reason; the severity of a False condition is in its reason."),
    "message": string("Human-readable detail."),
    "lastTransitionTime": string("When status, reason or message last changed.", format="date-time"),
    "observedGeneration": {"type": "integer", "format": "int64"},
}, required=["type", "status", "lastTransitionTime"])

DATABASE = obj({
    "host": string("Database server host (MariaDB/MySQL)."),
    "port": integer("Database server port.", default=3306, minimum=1),
    "secretRef": obj({"name": string()}, "Secret with key database-password; default: spec.secret."),
}, "The database server this service's schema lives on.", required=["host"])

TLS = obj({
    "enabled": boolean("Serve https and advertise https endpoints.", False),
    "caBundleSecretName": string("Secret with ca.crt trusted by every service."),
    "publicCertSecret": string("Secret with tls.crt/tls.key mounted into every API pod."),
    "issuerRef": obj({
        "name": string("The cert-manager Issuer or ClusterIssuer."),
        "kind": string("Issuer or ClusterIssuer.", default="Issuer", enum=["Issuer", "ClusterIssuer"]),
        "group": string("The issuer's API group.", default="cert-manager.io"),
    }, "A cert-manager issuer: the MultiRegionCloud then requests publicCertSecret as a Certificate "
       "for every host its endpoints name (cert-manager must be installed).", required=["name"]),
}, rules=[("!self.enabled || has(self.publicCertSecret)", "tls.enabled needs tls.publicCertSecret")], default={})

EXTERNAL_SERVICE = obj({
    "enabled": boolean("Serve this API in the region.", False),
    "mode": string("Deploy the API here, or register an existing one.", default="Deploy", enum=["Deploy", "External"]),
    "replicas": replicas(),
    "externalEndpoints": ENDPOINTS,
}, rules=[("!self.enabled || self.mode != 'External' || "
           "(has(self.externalEndpoints) && has(self.externalEndpoints.public)"
           " && has(self.externalEndpoints.internal))",
           "mode External needs externalEndpoints.public and externalEndpoints.internal")], default={})


# --- spec sections (the umbrella's sections are the child kinds' specs) ----------------------------------------------

def identity_section() -> Schema:
    return obj({
        "regionName": region_name("Keystone's own region (where the identity endpoints are bootstrapped).",
                                  DEFAULT_IDENTITY_REGION),
        "replicas": replicas(),
        "database": DATABASE,
        "memcachedServers": strings("host:port of memcached servers for Keystone's cache."),
        "fernetRotationInterval": string("How often the operator rotates the fernet keys (Go duration; 0: never). "
                                         "It keeps ceil((tokenExpiration + allowExpiredWindow) / interval) + 2 "
                                         "keys, at most 100.", default="24h", pattern=DURATION_PATTERN),
        "tokenExpiration": string("How long a token is valid (Go duration; keystone's [token] expiration).",
                                  default="24h", pattern=DURATION_PATTERN),
        "allowExpiredWindow": string("How long after expiry keystone still validates a token for a service "
                                     "(Go duration; [token] allow_expired_window).", default="48h",
                                     pattern=DURATION_PATTERN),
        "service": SERVICE_OVERRIDES,
        "external": obj({"publicURL": string(), "internalURL": string()},
                        "Use an existing Keystone instead of deploying one.",
                        required=["publicURL", "internalURL"]),
    }, "Keystone: the one identity service of every region.",
        rules=[("!has(self.external) || !has(self.database)", "identity.external and identity.database are exclusive")],
        default={})


def neutron_section() -> Schema:
    return obj({
        "replicas": replicas(),
        "ml2MechanismDrivers": strings("ML2 mechanism drivers of the region's Neutron (default openvswitch)."),
        "networkVlanRanges": strings("physnet:min:max VLAN ranges; must lie within the central ones."),
        "vniRanges": strings("min:max VXLAN ranges; must lie within the central ones."),
        "networkAttachments": strings("NetworkAttachmentDefinition names the Neutron pods join."),
        "customServiceConfig": string("Extra neutron.conf text, loaded after the rendered files."),
        "crossRegion": obj({"enabled": boolean("Register with central (cross-region networking).", True)},
                           default={}),
    }, default={})


def region_section() -> Schema:
    return obj({
        "name": region_name("The Keystone region id."),
        "availabilityZone": string("The region's availability zone (default: az<position>)."),
        "neutron": neutron_section(),
        "nova": EXTERNAL_SERVICE,
        "cinder": EXTERNAL_SERVICE,
        "service": SERVICE_OVERRIDES,
        "existingControlPlane": obj({
            "name": string("OpenStackControlPlane name."),
            "namespace": string("Its namespace (default: this resource's)."),
            "neutronURL": obj({"public": string(), "internal": string()},
                              "Its Neutron's endpoints (default: the neutron-public/internal Services)."),
        }, "An OpenStackControlPlane (openstack-k8s-operators / RHOSO) already running this region: "
           "patch the local plugin into its Neutron instead of deploying one.", required=["name"]),
    }, required=["name"])


def central_network_section() -> Schema:
    return obj({
        "enabled": boolean("Deploy the central Neutron, Admin API and job workers.", True),
        "regionName": region_name("The central Neutron's region.", DEFAULT_CENTRAL_REGION),
        "replicas": replicas(),
        "typeDrivers": strings("ML2 type drivers (default flat,vlan,vxlan)."),
        "tenantNetworkTypes": strings("Tenant network types (default vxlan)."),
        "networkVlanRanges": strings("physnet:min:max VLAN ranges of cross-region networks."),
        "vniRanges": strings("min:max VXLAN ranges of cross-region networks."),
        "flatNetworks": strings("Flat physical networks (default *)."),
        "database": DATABASE,
        "adminAPI": obj({"replicas": replicas(),
                         "port": integer("Admin API port.", default=ADMIN_API_PORT, minimum=1)}, default={}),
        "xjob": obj({"replicas": replicas(),
                     "gatewayMasterRegion": string(
                         "The API gateway's master region: the job workers resync its global objects "
                         "from there (set by the umbrella when it deploys a gateway).")}, default={}),
    }, default={})


def api_gateway_section() -> Schema:
    return obj({
        "enabled": boolean("Deploy the Nova/Cinder API gateway.", True),
        "regionName": region_name("The region users see the gateway in.", DEFAULT_CENTRAL_REGION),
        "nova": boolean("Serve and register the compute endpoint.", True),
        "cinder": boolean("Serve and register the volumev3 endpoint.", True),
        "replicas": replicas(),
        "masterRegion": string("Region of the global objects (flavors, keypairs); default: the first region."),
        "placementPolicy": string("Where a project's first server or volume binds it: the region with the fewest "
                                  "bound projects, or the most free RAM and VCPUs (Placement).",
                                  default="fewest_projects", enum=["fewest_projects", "most_free_capacity"]),
        "regionSelector": strings("Regions behind the gateway (default: all): its [gateway] regions. A region's "
                                  "availability zone is the Region's own (the registry every component reads)."),
    }, default={})


def ccm_section() -> Schema:
    return obj({
        "enabled": boolean("Render the cloud controller manager's cloud.conf.", False),
        "credentialsSecretRef": obj({
            "name": string(),
            "idKey": string(default="application-credential-id"),
            "secretKey": string(default="application-credential-secret"),
        }, "Application credential of the tenant cluster.", required=["name"]),
        "regions": strings("Regions of the tenant cluster (default: all)."),
        "regionalProviderID": boolean("providerID openstack://REGION/ID (OS_CCM_REGIONAL=true).", True),
        "loadBalancer": obj({"floatingNetworkID": string(), "subnetID": string(), "provider": string()}),
        "target": obj({
            "namespace": string("Namespace of the rendered Secret.", default="kube-system"),
            "secretName": string("Name of the rendered Secret.", default="cloud-config"),
        }, default={}),
    }, rules=[("!self.enabled || has(self.credentialsSecretRef)", "cloudControllerManager needs credentialsSecretRef")],
        default={})


DEFAULT_VERSION = "0.1.0"

COMMON_SPEC: dict[str, Schema] = {
    "version": string("The Isthmus release to run: the tag of every image not named in images, and the name "
                      "of the schema Jobs that migrate to it. Changing it on a MultiRegionCloud upgrades the "
                      "children one at a time (docs/operator.md, Upgrades).", default=DEFAULT_VERSION),
    "secret": string("Secret with admin-password, service-password, database-password and transport-url."),
    "images": string_map("Container image per service (keystone, neutron, nova, isthmus); default: built-in."),
    "nodeSelector": string_map("Node selector of every pod."),
    "tls": TLS,
    "database": DATABASE,
}


def multi_region_cloud_spec() -> Schema:
    return obj({
        **COMMON_SPEC,
        "defaultNetworkAttachments": strings("NADs every API pod joins unless its section names its own."),
        "identity": identity_section(),
        "regions": {
            "type": "array",
            "description": "The compute regions; duplicate names are rejected by the list's map key.",
            "minItems": 1,
            "maxItems": 64,
            "items": region_section(),
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
        "centralNetwork": central_network_section(),
        "apiGateway": api_gateway_section(),
        "cloudControllerManager": ccm_section(),
    }, required=["secret", "regions", "database"], rules=[
        ("self.regions.all(r, r.name != self.centralNetwork.regionName)",
         "a region cannot be named like the central network's region"),
        ("self.regions.all(r, r.name != self.identity.regionName)",
         "a region cannot be named like the identity region"),
    ])


def child_refs() -> dict[str, Schema]:
    return {
        "keystoneRef": string("The IdentityService this resource authenticates against."),
        "centralNetworkRef": string("The CentralNetwork this resource registers with."),
        "centralRegionName": region_name("The central region.", DEFAULT_CENTRAL_REGION),
        "identityRegionName": region_name("The identity region.", DEFAULT_IDENTITY_REGION),
    }


def identity_service_spec() -> Schema:
    section = identity_section()
    return obj({**COMMON_SPEC, **section["properties"]}, required=["secret"],
               rules=section["x-kubernetes-validations"])


def region_spec() -> Schema:
    return obj({**COMMON_SPEC, **child_refs(), **region_section()["properties"],
                "index": integer("Position among the cloud's regions (VNI block, default AZ).", default=0)},
               required=["secret", "name", "keystoneRef"],
               rules=[("self.name == oldSelf.name", "a region's name is immutable")])


def central_network_spec() -> Schema:
    return obj({**COMMON_SPEC, **child_refs(), **central_network_section()["properties"]},
               required=["secret", "keystoneRef"])


def api_gateway_spec() -> Schema:
    return obj({**COMMON_SPEC, **child_refs(), **api_gateway_section()["properties"],
                "regionRefs": strings("Region resources behind the gateway (resolved by the umbrella).")},
               required=["secret", "keystoneRef"])


def ccm_spec() -> Schema:
    section = ccm_section()
    return obj({**COMMON_SPEC, **child_refs(), **section["properties"],
                "regionRefs": strings("Region resources of the tenant cluster (resolved by the umbrella).")},
               required=["keystoneRef"], rules=section["x-kubernetes-validations"])


def endpoint_registration_spec() -> Schema:
    return obj({
        "secret": COMMON_SPEC["secret"],
        "keystoneRef": string("The IdentityService to register in."),
        "serviceType": string("Catalogue service type (network, compute, volumev3, multiregion)."),
        "serviceName": string("Catalogue service name."),
        "region": region_name("Region of the endpoints."),
        "endpoints": ENDPOINTS,
        "image": string("Image of the registration Job."),
        "tls": TLS,
    }, required=["serviceType", "serviceName", "region", "endpoints", "keystoneRef"],
        rules=[("self.region == oldSelf.region", "an endpoint registration's region is immutable")])


# --- status ----------------------------------------------------------------------------------------------------------

def status_schema(extra: dict[str, Schema]) -> Schema:
    return obj({
        "observedGeneration": {"type": "integer", "format": "int64"},
        "conditions": {
            "type": "array", "items": CONDITION,
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
            "description": "Ready first, then by type.",
        },
        **extra,
    })


ENDPOINT_MAP = string_map("service type -> URL")

STATUS_FIELDS: dict[str, dict[str, Schema]] = {
    "MultiRegionCloud": {
        "deployedVersion": string("The version every child runs (set when an upgrade is complete)."),
        "identity": obj({"endpoints": ENDPOINTS}),
        "regions": {"type": "array", "items": obj({"name": string(), "ready": {"type": "boolean"},
                                                   "version": string(), "endpoints": ENDPOINT_MAP})},
        "centralNetwork": obj({"endpoint": string()}),
        "apiGateway": obj({"endpoint": string()}),
    },
    "IdentityService": {
        "deployedVersion": string("The version its schema Jobs migrated to and its Deployments run, all Ready."),
        "apiEndpoints": ENDPOINTS, "region": string(), "readyReplicas": {"type": "integer"},
        "fernetKeysRotatedAt": string(format="date-time"),
    },
    "Region": {
        "deployedVersion": string("The version its schema Jobs migrated to and its Deployments run, all Ready."),
        "endpoints": ENDPOINT_MAP,
        "registeredWithCentral": obj({"registered": {"type": "boolean"}, "podId": string()}),
        "networkAttachments": {"type": "object", "additionalProperties": strings("")},
        "customServiceConfig": string("The snippet patched into an existing OpenStackControlPlane."),
    },
    "CentralNetwork": {
        "deployedVersion": string("The version its schema Jobs migrated to and its Deployments run, all Ready."),
        "endpoint": string(), "adminAPIEndpoint": string(),
        "registeredRegions": {"type": "array", "items": obj({"region": string(), "availabilityZone": string()})},
    },
    "APIGateway": {
        "deployedVersion": string("The version its schema Jobs migrated to and its Deployments run, all Ready."),
        "endpoint": string(),
        "backends": {"type": "array", "items": obj({"region": string(), "novaURL": string(), "cinderURL": string(),
                                                    "az": string()})},
        "configHash": string(),
    },
    "CloudControllerConfig": {"renderedSecret": string(), "renderedHash": string(), "regions": strings("")},
    "EndpointRegistration": {"registered": ENDPOINTS, "jobName": string()},
}


# --- the CRDs --------------------------------------------------------------------------------------------------------

KINDS: dict[str, tuple[str, str, Any]] = {
    # kind: (plural, short name, spec schema)
    "MultiRegionCloud": ("multiregionclouds", "mrc", multi_region_cloud_spec),
    "IdentityService": ("identityservices", "ids", identity_service_spec),
    "Region": ("regions", "osregion", region_spec),
    "CentralNetwork": ("centralnetworks", "cnet", central_network_spec),
    "APIGateway": ("apigateways", "apigw", api_gateway_spec),
    "CloudControllerConfig": ("cloudcontrollerconfigs", "ccmcfg", ccm_spec),
    "EndpointRegistration": ("endpointregistrations", "epreg", endpoint_registration_spec),
}


def plural(kind: str) -> str:
    return KINDS[kind][0]


PRINTER_COLUMNS = [
    # Ready sorts first in conditions, so [0] is Ready.
    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[0].status"},
    {"name": "Reason", "type": "string", "jsonPath": ".status.conditions[0].reason"},
    {"name": "Message", "type": "string", "jsonPath": ".status.conditions[0].message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd(kind: str) -> dict[str, Any]:
    plural_name, short, spec = KINDS[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural_name}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "isthmus"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural_name,
                      "singular": kind.lower(), "shortNames": [short], "categories": ["isthmus"]},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": obj({
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": spec(),
                    "status": status_schema(STATUS_FIELDS[kind]),
                }, required=["spec"])},
            }],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    return [crd(kind) for kind in KINDS]


def to_yaml() -> str:
    from isthmus.operator.yamlio import dump_all

    header = "# Generated by `isthmus operator crds` (isthmus/operator/crds.py); do not edit.\n"
    return header + dump_all(all_crds())
