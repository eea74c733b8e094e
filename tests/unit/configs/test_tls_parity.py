"""TLS in what the operator renders, against what the sandbox runs with ``--tls``: the
gateway and the Admin API serve https from an ``[ssl]`` section of the same shape, the
certificate at the path the pod mounts; with ``tls.caBundleSecretName`` every pod mounts
the bundle and every keystoneauth section trusts it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from isthmus.configs import ini
from isthmus.configs.services import admin_api_conf, gateway_conf
from isthmus.operator import objects
from isthmus.sandbox import admin_api, gateway
from isthmus.sandbox.layout import Layout
from tests.unit.operator.conftest import make_cloud
from tests.unit.operator.test_objects import CREDS
from tests.unit.operator.test_objects import ini as parsed

TLS = {"enabled": True, "publicCertSecret": "cert", "caBundleSecretName": "ca"}


def by_kind_and_name(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``Kind/name`` -> object (a Deployment, its Service and its budget share a name)."""
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objs}


def rendered() -> dict[str, dict[str, Any]]:
    cloud = make_cloud(tls=TLS, regions=[{"name": "RegionOne", "nova": {"enabled": True}}])
    kids = {c["metadata"]["name"]: c for c in objects.cloud_children(cloud)}
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    gw = kids["cloud-api-gateway"]
    out = objects.central_objects(kids["cloud-central-network"], CREDS, keystone, [("RegionOne", "az1")])
    out += objects.region_objects(kids["cloud-region-regionone"], CREDS, keystone)
    out += objects.gateway_objects(gw, CREDS, keystone, [], ["RegionOne"])
    return by_kind_and_name(out)


def test_the_apis_serve_https_as_the_sandbox_does_with_the_mounted_certificate(tmp_path: Path) -> None:
    layout = Layout(state_dir=tmp_path, tls=True)
    sandbox = {"gateway.conf": parsed(ini.render(gateway_conf(gateway.values(layout)))),
               "admin-api.conf": parsed(ini.render(admin_api_conf(admin_api.values(layout))))}
    objs = rendered()
    for secret, key, deployment in (("cloud-api-gateway-config", "gateway.conf", "cloud-api-gateway"),
                                    ("cloud-central-network-admin-api-config", "admin-api.conf",
                                     "cloud-central-network-admin-api")):
        ours = parsed(objs[f"Secret/{secret}"]["stringData"][key])
        theirs = sandbox[key]
        assert (set(ours["ssl"]) - set(ours.defaults()) == set(theirs["ssl"]) - set(theirs.defaults())
                == {"cert_file", "key_file"}), key
        pod = objs[f"Deployment/{deployment}"]["spec"]["template"]["spec"]
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tls"]
        assert ours["ssl"]["cert_file"] == f"{mount['mountPath']}/tls.crt", key
        assert {"name": "tls", "secret": {"secretName": "cert"}} in pod["volumes"]


def test_every_pod_trusts_the_ca_bundle_and_every_client_section_names_it() -> None:
    objs = rendered()
    pods = [o for o in objs.values() if o["kind"] in ("Deployment", "Job")]
    assert len(pods) >= 8
    for obj in pods:
        pod = obj["spec"]["template"]["spec"]
        assert {"name": "ca", "secret": {"secretName": "ca"}} in pod["volumes"], obj["metadata"]["name"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["OS_CACERT"] == f"{objects.CA_DIR}/ca.crt", obj["metadata"]["name"]
    sections = 0
    for obj in objs.values():
        for name, text in (obj.get("stringData") or {}).items():
            if not name.endswith((".conf", ".ini")):
                continue
            for section in parsed(text).values():
                if "auth_type" in section:
                    assert section.get("cafile") == f"{objects.CA_DIR}/ca.crt", (name, section.name)
                    sections += 1
    assert sections >= 6
    reg = next(o for o in objs.values() if o["kind"] == "EndpointRegistration")
    job = objects.registration_job(reg, objects.Endpoints("https://k/v3", "https://k/v3"), "RegionOne")
    assert {"name": "ca", "secret": {"secretName": "ca"}} in job["spec"]["template"]["spec"]["volumes"]
