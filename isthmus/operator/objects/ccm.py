"""CloudControllerConfig: the cloud.conf Secret the CCM reads."""


from __future__ import annotations

from collections.abc import Iterable

from isthmus.configs import cloudconf
from isthmus.operator import model
from isthmus.operator.objects.builders import Endpoints, Obj, config_hash, metadata, secret

# --- CloudControllerConfig -------------------------------------------------------------------------------------------

def ccm_objects(ccm: Obj, credential: tuple[str, str], keystone: Endpoints, regions: list[str]) -> list[Obj]:
    """``cloud.conf`` in the target Secret (kube-system/cloud-config by default) and the
    OCCM environment ConfigMap next to it."""
    spec = model.defaulted_spec("CloudControllerConfig", ccm.get("spec"))
    target = spec["target"]
    lb = spec.get("loadBalancer") or {}
    text = cloudconf.cloud_conf(cloudconf.CloudConfValues(
        auth_url=keystone.public, region=regions[0] if regions else "", regions=tuple(regions),
        application_credential_id=credential[0], application_credential_secret=credential[1],
        floating_network_id=lb.get("floatingNetworkID", ""), subnet_id=lb.get("subnetID", ""),
        lb_provider=lb.get("provider", "")))
    conf = secret(ccm, target["secretName"], "cloud-controller-manager", {"cloud.conf": text},
                  namespace=target["namespace"])
    env = {"OS_CCM_REGIONAL": "true" if spec["regionalProviderID"] else "false"}
    env_map = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": metadata(ccm, f"{target['secretName']}-env", "cloud-controller-manager",
                                    namespace=target["namespace"]), "data": env}
    return [conf, env_map]


def rendered_hash(objects: Iterable[Obj]) -> str:
    return config_hash(*objects)


