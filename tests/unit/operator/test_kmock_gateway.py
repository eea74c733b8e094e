"""The real operator against the kmock emulator, continued: the API gateway, the CCM's
cloud.conf, status mirroring, per-region config changes and TLS.

Same tier and harness as ``test_kmock.py``; its helpers are imported, not copied.
Each test switches off what it does not exercise, to keep the tier fast.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from isthmus.ccm.config import parse_config
from isthmus.operator import objects
from tests.unit.operator.kmock_harness import NS, Operator, ini, make, registrations, secret, secret_file

pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # the real operator against kmock (tests/tiers.py)

GW = "cloud-api-gateway"
CCM = "cloud-ccm"
IDS = "cloud-identity"
R1, R2 = "cloud-region-regionone", "cloud-region-regiontwo"
KEYSTONE_PUBLIC = f"http://{IDS}-public.{NS}.svc:5000/v3"
OFF = {"enabled": False}


def external(service: str, host: str) -> dict[str, Any]:
    """A nova/cinder section registering an existing API (no Deployment to simulate)."""
    path = "/v2.1" if service == "nova" else "/v3"
    return {"enabled": True, "mode": "External",
            "externalEndpoints": {"public": f"https://{host}.example{path}", "internal": f"http://{host}.int{path}"}}


async def settled(op: Operator) -> None:
    """op.settle(), bounded: a regression that makes the operator write forever must fail
    the test, not hang it until pytest-timeout."""
    await asyncio.wait_for(op.settle(), timeout=20)


def config_hash_of(dep: dict[str, Any]) -> str:
    return dep["spec"]["template"]["metadata"]["annotations"][objects.CONFIG_HASH]


def tls_mounts(dep: dict[str, Any]) -> list[tuple[str, str]]:
    """(mount path, Secret) of the ``tls`` volume of a Deployment's first container."""
    pod = dep["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes") or [] if "secret" in v}
    return [(m["mountPath"], secrets[m["name"]]) for m in pod["containers"][0].get("volumeMounts") or []
            if m["name"] == "tls"]


# --- 15, 16: the API gateway -----------------------------------------------------------------------------------------

async def _gateway(op: Operator) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """(the regions its gateway.conf lists, the gateway Deployment, the APIGateway)."""
    conf = ini(secret_file(await op.must_get("Secret", f"{GW}-config"), "gateway.conf"))
    return (conf["gateway"].get("regions", "").split(","), await op.must_get("Deployment", GW),
            await op.must_get("APIGateway", GW))


async def _converge_backends(op: Operator, regions: list[str]) -> None:
    """Simulate readiness until the gateway's backends are exactly ``regions`` (without
    waiting for the gateway's own Deployment and registrations, which 15 does not need)."""
    async def check():
        await op.simulate_ready()
        gw = await op.get("APIGateway", GW)
        status = (gw or {}).get("status") or {}
        return gw is not None and (status.get("observedGeneration") == gw["metadata"]["generation"]
                and [b["region"] for b in status.get("backends") or []] == regions)
    await op.until(check, f"gateway backends {regions}", timeout=60)


async def test_15_gateway_serves_the_selected_regions_and_reports_the_ready_ones(op: Operator) -> None:
    regions = [{"name": "RegionOne", "nova": external("nova", "nova1"), "cinder": external("cinder", "cinder1")},
               {"name": "RegionTwo", "availabilityZone": "zone-b", "nova": external("nova", "nova2")}]
    await make(op, regions=regions, centralNetwork=OFF, cloudControllerManager=OFF)
    await _converge_backends(op, ["RegionOne", "RegionTwo"])
    served, dep, gw = await _gateway(op)
    assert served == ["RegionOne", "RegionTwo"]
    assert gw["status"]["backends"] == [
        {"region": "RegionOne", "novaURL": "http://nova1.int/v2.1", "cinderURL": "http://cinder1.int/v3", "az": "az1"},
        {"region": "RegionTwo", "novaURL": "http://nova2.int/v2.1", "cinderURL": "", "az": "zone-b"}]
    # The pod template's hash is the hash of what the pods mount: the gateway.conf Secret.
    conf = await op.must_get("Secret", f"{GW}-config")
    first_hash = config_hash_of(dep)
    assert first_hash == gw["status"]["configHash"] == objects.config_hash(
        {"stringData": {"gateway.conf": secret_file(conf, "gateway.conf")}})
    assert await op.get("ConfigMap", f"{GW}-backends") is None  # no file that no service reads

    # A third region: served at once (a region that is not Ready is one the gateway's breakers
    # handle, not one it forgets), reported as a backend once Ready.
    regions.append({"name": "RegionThree", "cinder": external("cinder", "cinder3")})
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": regions}})
    waiting = await op.wait_condition("APIGateway", GW, "BackendsReady", "False")
    assert waiting["message"] == "waiting for Region cloud-region-regionthree"

    async def three_served():
        served, dep, gw = await _gateway(op)
        return served == ["RegionOne", "RegionThree", "RegionTwo"] and config_hash_of(dep) != first_hash
    await op.until(three_served, "RegionThree in gateway.conf")
    await _converge_backends(op, ["RegionOne", "RegionThree", "RegionTwo"])
    _, dep, gw = await _gateway(op)
    assert gw["status"]["backends"][1] == {"region": "RegionThree", "novaURL": "", "az": "az3",
                                           "cinderURL": "http://cinder3.int/v3"}
    assert config_hash_of(dep) == gw["status"]["configHash"] != first_hash

    # regionSelector: a region left out is not served, Ready as it is.
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"apiGateway": {"regionSelector": ["RegionOne",
                                                                                          "RegionThree"]}}})

    async def selected():
        served, _, gw = await _gateway(op)
        regions_ = [b["region"] for b in (gw.get("status") or {}).get("backends") or []]
        return regions_ == ["RegionOne", "RegionThree"] and served == regions_
    await op.until(selected, "RegionTwo dropped from the gateway")
    assert config_hash_of(await op.must_get("Deployment", GW)) not in (first_hash, gw["status"]["configHash"])


async def test_16_gateway_registers_compute_and_volume_per_toggle(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}], centralNetwork=OFF, cloudControllerManager=OFF,
               apiGateway={"regionName": "GatewayRegion", "cinder": False})
    await op.converge("IdentityService", IDS)
    public, internal = f"http://{GW}-public.{NS}.svc:19998", f"http://{GW}-internal.{NS}.svc:19998"
    compute = (await op.until(lambda: registrations(op, GW), "gateway registrations"))["compute"]
    assert compute["spec"]["region"] == "GatewayRegion" and compute["spec"]["serviceName"] == "nova"
    assert compute["spec"]["endpoints"] == {"public": f"{public}/compute/v2.1", "internal": f"{internal}/compute/v2.1"}
    await settled(op)
    assert set(await registrations(op, GW)) == {"compute"}  # cinder: False
    # The region has nova off: the gateway's is the one compute entry, in the gateway's region.
    assert [r["spec"]["region"] for r in await op.list("EndpointRegistration")
            if r["spec"]["serviceType"] == "compute"] == ["GatewayRegion"]

    await op.patch("MultiRegionCloud", "cloud", {"spec": {"apiGateway": {"nova": False, "cinder": True}}})

    async def swapped():
        await op.simulate_ready()  # the removed registration's deregistration Job, if it ran
        regs = await registrations(op, GW)
        return regs if set(regs) == {"volumev3"} else None
    volume = (await op.until(swapped, "volumev3 registered, compute removed"))["volumev3"]
    assert volume["spec"]["region"] == "GatewayRegion" and volume["spec"]["serviceName"] == "cinderv3"
    assert volume["spec"]["endpoints"] == {"public": f"{public}/volume/v3", "internal": f"{internal}/volume/v3"}


# --- 17: the CCM's cloud.conf ----------------------------------------------------------------------------------------

async def test_17_ccm_cloud_conf_secret(op: Operator) -> None:
    await make(op, centralNetwork=OFF, apiGateway=OFF)  # RegionOne, RegionTwo; CCM with the appcred Secret

    async def rendered(regions: list[str]):
        ccm = await op.get("CloudControllerConfig", CCM)
        if ccm is None:  # not made yet
            return None
        status = ccm.get("status") or {}
        if status.get("regions") != regions or status.get("observedGeneration") != ccm["metadata"]["generation"]:
            return None
        conf = await op.get("Secret", "cloud-config", namespace="kube-system")
        return (status, secret_file(conf, "cloud.conf")) if conf else None

    status, text = await op.until(lambda: rendered(["RegionOne", "RegionTwo"]), "cloud.conf with two regions")
    assert status["renderedSecret"] == "kube-system/cloud-config"
    parsed = parse_config(text)  # read back by the CCM's own reader
    assert parsed.global_.auth_url == KEYSTONE_PUBLIC
    assert (parsed.global_.application_credential_id, parsed.global_.application_credential_secret) == ("id1", "sec1")
    assert parsed.regions == ("RegionOne", "RegionTwo")
    assert status["renderedHash"] == objects.config_hash({"stringData": {"cloud.conf": text}})
    assert (await op.must_condition("CloudControllerConfig", CCM, "Ready"))["status"] == "True"
    env = await op.must_get("ConfigMap", "cloud-config-env", namespace="kube-system")
    assert env["data"] == {"OS_CCM_REGIONAL": "true"}  # regionalProviderID defaults to true

    # Removing a region from the cloud re-renders the Secret and changes the hash.
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": [{"name": "RegionOne"}]}})
    status2, text2 = await op.until(lambda: rendered(["RegionOne"]), "cloud.conf with one region")
    assert parse_config(text2).regions == ("RegionOne",) and "RegionTwo" not in text2
    assert status2["renderedHash"] == objects.config_hash({"stringData": {"cloud.conf": text2}})
    assert status2["renderedHash"] != status["renderedHash"]

    await op.patch("MultiRegionCloud", "cloud", {"spec": {"cloudControllerManager": {"regionalProviderID": False}}})

    async def not_regional():
        env = await op.must_get("ConfigMap", "cloud-config-env", namespace="kube-system")
        return env["data"] == {"OS_CCM_REGIONAL": "false"}
    await op.until(not_regional, "OS_CCM_REGIONAL=false")


# --- 21: mirroring ---------------------------------------------------------------------------------------------------

async def test_21_region_failure_mirrored_to_the_cloud(op: Operator) -> None:
    # RegionTwo's VNIs overlap central's (1:99999): CrossRegionConfigValid=False/RangeMismatch, an error.
    good = [{"name": "RegionOne"}, {"name": "RegionTwo"}]
    bad = [{"name": "RegionOne"}, {"name": "RegionTwo", "neutron": {"vniRanges": ["500:600"]}}]
    await make(op, regions=bad, apiGateway=OFF, cloudControllerManager=OFF)
    ready = await op.wait_condition("Region", R2, "Ready", "False")
    m = "VNI range 500:600 overlaps central's 1:99999"
    assert (ready["reason"], ready["message"]) == ("RangeMismatch", m)

    async def mirrored(expected: str):
        c = await op.condition("MultiRegionCloud", "cloud", "RegionsReady")
        return c if c and c["message"] == expected else None
    # Keystone is not up yet: RegionOne waits too (info), RegionTwo's error comes first.
    regions_ready = await op.until(lambda: mirrored(
        f"Region RegionTwo: {m}; Region RegionOne: Waiting for IdentityService {IDS}"), "RegionsReady, both regions")
    assert (regions_ready["status"], regions_ready["reason"]) == ("False", "RangeMismatch")
    # The cloud's Ready mirrors the highest-priority failure: RegionsReady's error, not IdentityReady's info.
    identity = await op.wait_condition("MultiRegionCloud", "cloud", "IdentityReady", "False")
    assert identity["reason"] == "Running"  # Keystone's db_sync Job: nobody completes it yet
    mrc_ready = await op.must_condition("MultiRegionCloud", "cloud", "Ready")
    assert (mrc_ready["status"], mrc_ready["reason"], mrc_ready["message"]) == (
        "False", "RangeMismatch", regions_ready["message"])

    # Fixed: everything True => the cloud is Ready. (Dropping vniRanges from the umbrella
    # must drop it from the child Region, which a plain merge patch of the child did not.)
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": good}})
    await op.wait_condition("Region", R2, "CrossRegionConfigValid", "True")
    assert "vniRanges" not in (await op.must_get("Region", R2))["spec"]["neutron"]
    await op.converge("MultiRegionCloud", "cloud", timeout=90)
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    conditions = {c["type"]: c["status"] for c in mrc["status"]["conditions"]}
    assert conditions == {"Ready": "True", "IdentityReady": "True", "RegionsReady": "True",
                          "CentralNetworkReady": "True", "Updated": "True"}


# --- 23: one region's customServiceConfig ----------------------------------------------------------------------------

async def test_23_custom_service_config_touches_only_its_region(op: Operator) -> None:
    def regions(two: str) -> list[dict[str, Any]]:
        return [{"name": "RegionOne", "neutron": {"customServiceConfig": "[DEFAULT]\ndebug = false\n"}},
                {"name": "RegionTwo", "neutron": {"customServiceConfig": two}}]
    await make(op, regions=regions("[DEFAULT]\ndebug = false\n"), centralNetwork=OFF, apiGateway=OFF,
               cloudControllerManager=OFF)
    await op.converge("IdentityService", IDS)

    async def deployments():
        await op.simulate_ready()
        return all([await op.get("Deployment", f"{r}-neutron") for r in (R1, R2)])
    await op.until(deployments, "both neutron Deployments")
    await settled(op)
    before = op.versions()
    deps = {r: await op.must_get("Deployment", f"{r}-neutron") for r in (R1, R2)}

    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": regions("[DEFAULT]\ndebug = true\n")}})

    async def rewritten():
        conf = await op.must_get("Secret", f"{R2}-neutron-config")
        dep = await op.must_get("Deployment", f"{R2}-neutron")
        return (conf, dep) if (ini(secret_file(conf, "custom.conf"))["DEFAULT"]["debug"] == "true"
                               and config_hash_of(dep) != config_hash_of(deps[R2])) else None
    conf, dep = await op.until(rewritten, "RegionTwo's config Secret and Deployment")
    await settled(op)
    after = op.versions()
    # RegionTwo: the Secret and the Deployment (its hash, nothing else in the template) changed.
    files = {key: secret_file(conf, key) for key in conf["data"]}
    assert config_hash_of(dep) == objects.config_hash({"stringData": files})
    old_template, new_template = deps[R2]["spec"]["template"], dep["spec"]["template"]
    assert {**new_template, "metadata": {}} == {**old_template, "metadata": {}}
    changed = {key for key in after if after[key] != before.get(key)}
    assert changed == {("secrets", NS, f"{R2}-neutron-config"), ("deployments", NS, f"{R2}-neutron")}
    # RegionOne: nothing rewritten.
    assert config_hash_of(await op.must_get("Deployment", f"{R1}-neutron")) == config_hash_of(deps[R1])
    r1_conf = await op.must_get("Secret", f"{R1}-neutron-config")
    assert ini(secret_file(r1_conf, "custom.conf"))["DEFAULT"]["debug"] == "false"


# --- 24: TLS ---------------------------------------------------------------------------------------------------------

async def test_24_tls(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}], tls={"enabled": True, "publicCertSecret": "public-cert"},
               centralNetwork=OFF, apiGateway=OFF, cloudControllerManager=OFF)
    c = await op.wait_condition("IdentityService", IDS, "TLSInputReady", "False")
    assert (c["reason"], c["message"]) == ("TLSSecretNotFound", "TLS Secret public-cert not found")
    assert (await op.must_condition("IdentityService", IDS, "Ready"))["reason"] == "TLSSecretNotFound"
    c = await op.wait_condition("Region", R1, "TLSInputReady", "False")
    assert c["reason"] == "TLSSecretNotFound"
    await settled(op)
    assert await op.get("Deployment", IDS) is None
    assert await op.list("Job") == []  # stopped before any workload, not only the Deployment

    # The certificate arrives: reconciliation resumes by itself.
    await op.create(secret("public-cert", {"tls.crt": "CERT", "tls.key": "KEY"}))
    await op.converge("IdentityService", IDS)
    assert (await op.must_condition("IdentityService", IDS, "TLSInputReady"))["status"] == "True"
    ids = await op.must_get("IdentityService", IDS)
    assert ids["status"]["apiEndpoints"] == {"public": f"https://{IDS}-public.{NS}.svc:5000/v3",
                                             "internal": f"https://{IDS}-internal.{NS}.svc:5000/v3"}
    keystone = await op.must_get("Deployment", IDS)
    assert tls_mounts(keystone) == [(objects.TLS_DIR, "public-cert")]
    command = keystone["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--certfile") + 1] == f"{objects.TLS_DIR}/tls.crt"

    async def neutron():
        await op.simulate_ready()
        return await op.get("Deployment", f"{R1}-neutron")
    assert tls_mounts(await op.until(neutron, "neutron Deployment")) == [(objects.TLS_DIR, "public-cert")]
    region = await op.must_get("Region", R1)
    assert region["status"]["endpoints"] == {"network": f"https://{R1}-neutron-public.{NS}.svc:9696"}
    regs = await op.until(lambda: registrations(op, R1), "the region's registrations")
    assert regs["identity"]["spec"]["endpoints"]["public"] == f"https://{IDS}-public.{NS}.svc:5000/v3"
    assert regs["network"]["spec"]["endpoints"] == {"public": f"https://{R1}-neutron-public.{NS}.svc:9696",
                                                    "internal": f"https://{R1}-neutron-internal.{NS}.svc:9696"}
    # The MultiRegionCloud advertises the https Keystone too.
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    assert mrc["status"]["identity"]["endpoints"]["public"] == f"https://{IDS}-public.{NS}.svc:5000/v3"


async def test_child_spec_patch_removes_dropped_fields_and_settles() -> None:
    """The fix test_21 relies on, at the pure level: a field dropped from a child's desired
    spec is nulled in the patch; the CRD defaults an API server adds cause no patch."""
    from isthmus.operator import apply, model

    def region(neutron: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "isthmus.dev/v1alpha1", "kind": "Region",
                "metadata": {"name": R2, "namespace": NS}, "spec": {"name": "RegionTwo", "neutron": neutron}}

    stored = region({"vniRanges": ["500:600"], "replicas": 1})
    patch = apply.desired_patch(region({"replicas": 1}), stored)
    assert patch == {"spec": {"name": "RegionTwo", "neutron": {"replicas": 1, "vniRanges": None}}}
    desired = region({"replicas": 1})
    as_served = {**desired, "spec": model.defaulted_spec("Region", desired["spec"])}  # what an API server stores
    assert as_served["spec"] != desired["spec"]
    assert apply.desired_patch(desired, as_served) is None


# --- least privilege: only what the operator owns, only where it is allowed -------------------------------------------

async def test_an_object_the_operator_does_not_own_is_never_patched(op: Operator) -> None:
    # Someone else's Secret already sits at the CCM's target name: with credentials of its own.
    foreign = {"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "cloud-config", "namespace": "kube-system", "labels": {"team": "platform"}},
               "stringData": {"cloud.conf": "[Global]\nauth-url=https://theirs.example/v3\n"}}
    await op.create(foreign)
    before = await op.must_get("Secret", "cloud-config", namespace="kube-system")
    await make(op, centralNetwork=OFF, apiGateway=OFF)
    refused = await op.wait_condition("CloudControllerConfig", CCM, "ObjectsOwned", "False")
    assert refused["reason"] == "NotOwned"
    assert "Secret kube-system/cloud-config exists and is not managed by CloudControllerConfig" in refused["message"]
    assert (await op.must_condition("CloudControllerConfig", CCM, "Ready"))["status"] == "False"
    await settled(op)
    after = await op.must_get("Secret", "cloud-config", namespace="kube-system")
    assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
    assert after["metadata"]["labels"] == {"team": "platform"} and after.get("data") == before.get("data")

    # Once the owner removes it, the operator writes its own, and the condition clears.
    await op.delete("Secret", "cloud-config", namespace="kube-system")
    await op.wait_condition("CloudControllerConfig", CCM, "Ready", "True")
    ours = await op.must_get("Secret", "cloud-config", namespace="kube-system")
    assert ours["metadata"]["annotations"][objects.OWNER_ANNOTATION] == f"CloudControllerConfig/{NS}/{CCM}"


async def test_writes_outside_the_namespace_only_where_the_operator_is_configured_to(
        op: Operator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISTHMUS_OPERATOR_TARGET_NAMESPACES", "kube-system")
    await make(op, centralNetwork=OFF, apiGateway=OFF,
               cloudControllerManager={"enabled": True, "credentialsSecretRef": {"name": "appcred"},
                                       "target": {"namespace": "tenant-b", "secretName": "cloud-config"}})
    refused = await op.wait_condition("CloudControllerConfig", CCM, "InputReady", "False")
    assert refused["reason"] == "NamespaceNotAllowed"
    assert refused["message"].startswith("spec.target.namespace: ") and "not to tenant-b" in refused["message"]
    await settled(op)
    assert await op.get("Secret", "cloud-config", namespace="tenant-b") is None
    assert await op.get("ConfigMap", "cloud-config-env", namespace="tenant-b") is None


async def test_tls_from_cert_manager_when_it_is_installed(op: Operator) -> None:
    tls = {"enabled": True, "publicCertSecret": "public-cert", "issuerRef": {"name": "cloud-ca"}}
    await make(op, regions=[{"name": "RegionOne"}], tls=tls, centralNetwork=OFF, apiGateway=OFF,
               cloudControllerManager=OFF)
    # No cert-manager: the umbrella says so, naming the field; nothing is requested.
    c = await op.wait_condition("MultiRegionCloud", "cloud", "CertificateReady", "False")
    assert c["reason"] == "CertManagerMissing" and c["message"].startswith("spec.tls.issuerRef: cert-manager is not")
    assert await op.list("Certificate") == []

    # cert-manager installed (its CRD appears): the cloud's certificate is requested for
    # every host of its endpoints, into the Secret the services mount.
    await op.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                     "metadata": {"name": "certificates.cert-manager.io", "namespace": None},
                     "spec": {"group": "cert-manager.io", "scope": "Namespaced",
                              "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate"},
                              "versions": [{"name": "v1", "served": True, "storage": True}]}})
    await op.patch("MultiRegionCloud", "cloud", {"metadata": {"labels": {"poke": "1"}}})  # the timer's work, sooner
    cert = await op.until(lambda: op.get("Certificate", "cloud-tls"), "the Certificate")
    assert cert["spec"]["secretName"] == "public-cert"
    assert cert["spec"]["issuerRef"] == {"name": "cloud-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert {f"{IDS}-public.{NS}.svc", f"{IDS}-internal.{NS}.svc", f"{R1}-neutron-public.{NS}.svc"} <= set(
        cert["spec"]["dnsNames"])
    c = await op.wait_condition("MultiRegionCloud", "cloud", "CertificateReady", "False")
    assert c["reason"] == "Issuing"
    # cert-manager issues it: the Secret appears, the children go on as with a given one.
    await op.create(secret("public-cert", {"tls.crt": "CERT", "tls.key": "KEY"}))
    await op.patch("Certificate", "cloud-tls", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "message": "issued"}]}})
    await op.converge("IdentityService", IDS)
    await op.wait_condition("MultiRegionCloud", "cloud", "CertificateReady", "True")


async def test_a_region_no_read_found_is_not_dropped_from_the_gateway(kmock: Any) -> None:
    """reconcile_gateway alone against kmock: an APIGateway naming a Region that one read
    did not find leaves its gateway as it is (BackendsReady names the Region) rather than
    render a [gateway] regions without it."""
    from isthmus.operator import controllers
    from tests.unit.operator.kmock_harness import PASSWORDS, ServerLikeKube, register_resources

    register_resources(kmock)
    kube = ServerLikeKube(str(kmock.url))
    ready = {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
    try:
        await kube.create(secret("passwords", dict(PASSWORDS)))
        await kube.create({"apiVersion": "isthmus.dev/v1alpha1", "kind": "IdentityService",
                           "metadata": {"name": IDS, "namespace": NS}, "spec": {"secret": "passwords"}})
        await kube.patch("IdentityService", NS, IDS, {"status": ready}, subresource="status")
        await kube.create({"apiVersion": "isthmus.dev/v1alpha1", "kind": "Region", "metadata": {"name": R1,
                           "namespace": NS}, "spec": {"name": "RegionOne", "secret": "passwords", "keystoneRef": IDS}})
        gw = await kube.create({"apiVersion": "isthmus.dev/v1alpha1", "kind": "APIGateway",
                                "metadata": {"name": GW, "namespace": NS},
                                "spec": {"secret": "passwords", "keystoneRef": IDS, "database": {"host": "db"},
                                         "regionRefs": [R1, "cloud-region-ghost"]}})
        gw.setdefault("kind", "APIGateway")
        await controllers.reconcile_gateway(kube, gw)
        stored = await kube.get("APIGateway", NS, GW)
        assert stored is not None
        backends = next(c for c in stored["status"]["conditions"] if c["type"] == "BackendsReady")
        assert backends["status"] == "False" and "cloud-region-ghost" in backends["message"]
        assert await kube.get("Secret", NS, f"{GW}-config") is None  # nothing rendered without it
    finally:
        await kube.close()
