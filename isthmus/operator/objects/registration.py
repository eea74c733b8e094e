"""EndpointRegistration: the Job that registers (or removes) a service's endpoints in Keystone."""


from __future__ import annotations

import hashlib
import json

from isthmus.operator.objects.builders import DEFAULT_IMAGE, Endpoints, Obj, Pod, job

# --- EndpointRegistration --------------------------------------------------------------------------------------------

def registration_job(reg: Obj, keystone: Endpoints, identity_region: str, delete: bool = False) -> Obj:
    """A Job that creates the region, service and public/internal endpoints if missing and
    fixes their URLs (``isthmus operator register-endpoint``: openstacksdk as the admin,
    idempotent); with ``delete``, one that removes the endpoints (deregistration)."""
    spec = reg["spec"]
    args = ["--service-type", spec["serviceType"], "--service-name", spec["serviceName"], "--region", spec["region"],
            "--public", spec["endpoints"]["public"], "--internal", spec["endpoints"]["internal"]]
    if delete:
        args.append("--delete")
    env = (("OS_AUTH_URL", keystone.internal), ("OS_REGION_NAME", identity_region))
    pod = Pod("endpoint-registration", spec.get("image") or DEFAULT_IMAGE,
              ["isthmus", "operator", "register-endpoint", *args], env=env,
              secret_env=(("OS_PASSWORD", spec["secret"], "admin-password"),))
    digest = hashlib.sha256(json.dumps(args).encode()).hexdigest()[:8]
    return job(reg, f"{reg['metadata']['name']}-{digest}", pod, spec, [], spec["region"])
