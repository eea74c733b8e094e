"""IdentityService: Keystone's objects."""


from __future__ import annotations

import base64
import secrets as _secrets
from dataclasses import replace

from isthmus.configs import ini, services
from isthmus.operator import fernet, model
from isthmus.operator.objects import builders as b

# --- IdentityService -------------------------------------------------------------------------------------------------

def identity_endpoints(ids: b.Obj) -> b.Endpoints:
    spec = ids["spec"]
    if spec.get("external"):
        return b.Endpoints(spec["external"]["publicURL"], spec["external"]["internalURL"])
    return b.endpoints(spec, ids["metadata"]["name"], b.namespace_of(ids), b.KEYSTONE_PORT, "/v3", spec.get("service"))


def fernet_keys() -> dict[str, str]:
    """Two fernet keys: 0 (staged) and 1 (primary), as keystone-manage fernet_setup makes them."""
    return {str(i): base64.urlsafe_b64encode(_secrets.token_bytes(32)).decode() for i in range(2)}


def identity_objects(ids: b.Obj, creds: b.Credentials) -> list[b.Obj]:
    spec = model.defaulted_spec("IdentityService", ids.get("spec"))
    name, comp = ids["metadata"]["name"], "keystone"
    if spec.get("external"):
        return []  # an existing Keystone: nothing to deploy
    keys = fernet.KeyPolicy.of(spec)  # the CRD's patterns made its durations parseable
    values = services.KeystoneValues(
        database_connection=b.db_url(spec, creds, "keystone", spec),
        fernet_key_repository="/etc/keystone/fernet-keys",
        credential_key_repository="/etc/keystone/credential-keys",
        token_expiration=int(keys.token_expiration.total_seconds()),
        allow_expired_window=int(keys.allow_expired_window.total_seconds()),
        max_active_keys=min(keys.max_active, fernet.MAX_KEYS),
        memcache_servers=tuple(spec.get("memcachedServers") or ()))
    config = b.secret(ids, f"{name}-config", comp,
                      {"keystone.conf": ini.render(ini.prune(services.keystone_conf(values)))})
    fernet_secret = b.secret(ids, f"{name}-fernet-keys", comp, fernet_keys(), annotations={b.GENERATED: "true"})
    credential = b.secret(ids, f"{name}-credential-keys", comp, fernet_keys(), annotations={b.GENERATED: "true"})
    urls = identity_endpoints({**ids, "spec": spec})
    base = b.Pod(comp, b.image(spec, "keystone"), [], config_secret=f"{name}-config", config_dir="/etc/keystone/conf",
                 env=(("OS_KEYSTONE_CONFIG_FILES", "/etc/keystone/conf/keystone.conf"),),
                 extra_volumes=(("fernet-keys", f"{name}-fernet-keys", "/etc/keystone/fernet-keys"),
                                ("credential-keys", f"{name}-credential-keys", "/etc/keystone/credential-keys")))
    manage = ["keystone-manage", "--config-file", "/etc/keystone/conf/keystone.conf"]
    db_sync = b.job(ids, b.schema_job_name(f"{name}-db-sync", spec), replace(base, command=[*manage, "db_sync"]), spec,
                    [config])
    bootstrap = b.job(ids, f"{name}-bootstrap", replace(
        base, command=["sh", "-c", " ".join(manage) + ' bootstrap --bootstrap-password "$OS_BOOTSTRAP_PASSWORD"'
                       ' --bootstrap-region-id "$OS_BOOTSTRAP_REGION_ID"'
                       ' --bootstrap-public-url "$OS_BOOTSTRAP_PUBLIC_URL"'
                       ' --bootstrap-internal-url "$OS_BOOTSTRAP_INTERNAL_URL"'],
        env=base.env + (("OS_BOOTSTRAP_REGION_ID", spec["regionName"]), ("OS_BOOTSTRAP_PUBLIC_URL", urls.public),
                        ("OS_BOOTSTRAP_INTERNAL_URL", urls.internal)),
        secret_env=(("OS_BOOTSTRAP_PASSWORD", spec["secret"], "admin-password"),)), spec, [config])
    api_pod = replace(base, command=b.gunicorn("keystone.wsgi.api:application", b.KEYSTONE_PORT, spec),
                      port=b.KEYSTONE_PORT)
    api = b.deployment(ids, name, api_pod, spec, spec["replicas"], [config])
    return [config, fernet_secret, credential, db_sync, bootstrap, api,
            *b.service_pair(ids, name, comp, b.KEYSTONE_PORT, None, spec.get("service")),
            *b.disruption_budgets(ids, [api])]


