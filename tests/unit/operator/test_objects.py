"""spec -> objects: the pure functions the handlers and ``isthmus operator render`` share."""

from __future__ import annotations

import configparser
import json
from typing import Any

import pytest
import yaml

from isthmus.ccm.config import parse_config
from isthmus.operator import objects
from isthmus.operator.preview import render_documents
from tests.unit.operator.conftest import PASSWORDS, make_cloud, passwords_secret

CREDS = objects.Credentials.from_secret_data(PASSWORDS)


def ini(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parser


def by_name(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs}


def children(cloud) -> dict[str, dict[str, Any]]:
    return by_name(objects.cloud_children(cloud))


def test_children_names_owners_and_labels(cloud) -> None:
    kids = objects.cloud_children(cloud)
    assert [(k["kind"], k["metadata"]["name"]) for k in kids] == [
        ("IdentityService", "cloud-identity"), ("Region", "cloud-region-regionone"),
        ("Region", "cloud-region-regiontwo"), ("CentralNetwork", "cloud-central-network"),
        ("APIGateway", "cloud-api-gateway"), ("CloudControllerConfig", "cloud-ccm")]
    for kid in kids:
        (ref,) = kid["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "isthmus.dev/v1alpha1", "kind": "MultiRegionCloud", "name": "cloud",
                       "uid": "uid-cloud", "controller": True, "blockOwnerDeletion": True}
        assert kid["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "isthmus-operator"
        assert kid["metadata"]["labels"]["app.kubernetes.io/part-of"] == "cloud"
    assert children(cloud)["cloud-region-regiontwo"]["metadata"]["labels"]["isthmus.dev/region"] == "RegionTwo"


def test_disabled_sections_have_no_child() -> None:
    kids = children(make_cloud(apiGateway={"enabled": False}, cloudControllerManager={"enabled": False},
                               centralNetwork={"enabled": False}))
    assert set(kids) == {"cloud-identity", "cloud-region-regionone", "cloud-region-regiontwo"}
    assert "centralNetworkRef" not in kids["cloud-region-regionone"]["spec"]


def test_identity_objects(cloud) -> None:
    ids = children(cloud)["cloud-identity"]
    objs = by_name(objects.identity_objects(ids, CREDS))
    conf = ini(objs["cloud-identity-config"]["stringData"]["keystone.conf"])
    assert conf["database"]["connection"] == "mysql+pymysql://keystone:db-pw@db.example:3306/keystone?charset=utf8"
    assert conf["cache"]["memcache_servers"] == "mc:11211"
    for keys in ("cloud-identity-fernet-keys", "cloud-identity-credential-keys"):
        assert set(objs[keys]["stringData"]) == {"0", "1"}
        assert objs[keys]["metadata"]["annotations"][objects.GENERATED] == "true"
    env = {e["name"]: e.get("value") for e in
           objs["cloud-identity-bootstrap"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OS_BOOTSTRAP_REGION_ID"] == "CentralRegion"
    assert objs["cloud-identity"]["spec"]["replicas"] == 1
    for svc in ("cloud-identity-public", "cloud-identity-internal"):
        assert objs[svc]["spec"]["ports"][0]["port"] == 5000
    assert objects.identity_endpoints(ids) == objects.Endpoints(
        "http://cloud-identity-public.ns1.svc:5000/v3", "http://cloud-identity-internal.ns1.svc:5000/v3")


def region_objs(cloud, name="cloud-region-regionone") -> dict[str, dict[str, Any]]:
    kids = children(cloud)
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    return by_name(objects.region_objects(kids[name], CREDS, keystone))


def test_region_neutron_config(cloud) -> None:
    objs = region_objs(cloud)
    files = objs["cloud-region-regionone-neutron-config"]["stringData"]
    conf, ml2 = ini(files["neutron.conf"]), ini(files["ml2_conf.ini"])
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_local"
    assert conf["isthmus"]["central_region"] == "CentralRegion"
    assert conf["isthmus"]["region_name"] == "RegionOne"
    assert conf["keystone_authtoken"]["auth_url"] == "http://cloud-identity-internal.ns1.svc:5000/v3"
    assert conf["keystone_authtoken"]["www_authenticate_uri"] == "http://cloud-identity-public.ns1.svc:5000/v3"
    assert conf["keystone_authtoken"]["region_name"] == "RegionOne"
    assert conf["isthmus_central"]["region_name"] == "RegionOne"
    assert ml2["ml2_type_vxlan"]["vni_ranges"] == "100000:199999"
    two = region_objs(cloud, "cloud-region-regiontwo")
    assert ini(two["cloud-region-regiontwo-neutron-config"]["stringData"]["ml2_conf.ini"])[
        "ml2_type_vxlan"]["vni_ranges"] == "200000:299999"


def test_region_network_attachments_annotation() -> None:
    cloud = make_cloud(regions=[{"name": "RegionOne", "neutron": {"networkAttachments": ["internalapi", "tenant"]}}])
    template = region_objs(cloud)["cloud-region-regionone-neutron"]["spec"]["template"]
    assert json.loads(template["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]) == [
        {"name": "internalapi", "namespace": "ns1"}, {"name": "tenant", "namespace": "ns1"}]


def test_region_registrations_follow_nova_and_cinder() -> None:
    plain = region_objs(make_cloud())
    regs = {o["spec"]["serviceType"]: o for o in plain.values() if o["kind"] == "EndpointRegistration"}
    assert set(regs) == {"identity", "network"}
    assert regs["network"]["spec"]["region"] == "RegionOne"
    assert set(regs["network"]["spec"]["endpoints"]) == {"public", "internal"}
    deploy = region_objs(make_cloud(regions=[{"name": "RegionOne", "nova": {"enabled": True}}]))
    assert "cloud-region-regionone-nova-api" in deploy and "cloud-region-regionone-nova-public" in deploy
    assert any(o["kind"] == "EndpointRegistration" and o["spec"]["serviceType"] == "compute" for o in deploy.values())
    external = region_objs(make_cloud(regions=[{"name": "RegionOne", "nova": {
        "enabled": True, "mode": "External", "externalEndpoints": {"public": "https://n/v2.1", "internal": "http://i"}}}]))
    assert "cloud-region-regionone-nova-api" not in external
    assert external["cloud-region-regionone-compute"]["spec"]["endpoints"] == {"public": "https://n/v2.1",
                                                                             "internal": "http://i"}


def test_nova_and_cinder_deploy_sync_their_schema_with_the_shared_renderer() -> None:
    objs = region_objs(make_cloud(regions=[{"name": "RegionOne", "nova": {"enabled": True},
                                            "cinder": {"enabled": True}}]))
    nova = ini(objs["cloud-region-regionone-nova-config"]["stringData"]["nova.conf"])
    assert "@db.example:3306/nova_api_regionone?" in nova["api_database"]["connection"]
    assert nova["placement"]["region_name"] == nova["glance"]["region_name"] == "RegionOne"
    assert nova["DEFAULT"]["default_availability_zone"] == "az1"
    cinder = ini(objs["cloud-region-regionone-cinder-config"]["stringData"]["cinder.conf"])
    assert cinder["nova"]["region_name"] == "RegionOne" and cinder["nova"]["interface"] == "internal"
    for key, steps in (("nova", ["api_db sync", "cell_v2 map_cell0", "create_cell --name cell1", "$m db sync"]),
                       ("cinder", ["db sync"])):
        job = objs[f"cloud-region-regionone-{key}-db-sync-0-1-0"]
        command = " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
        assert f"--config-file /etc/{key}/conf/{key}.conf" in command
        positions = [command.index(step) for step in steps]
        assert positions == sorted(positions), command
    # The cell is created once: a rerun of the Job finds it.
    assert "grep -q ' cell1 ' ||" in " ".join(
        objs["cloud-region-regionone-nova-db-sync-0-1-0"]["spec"]["template"]["spec"]["containers"][0]["command"])


def test_custom_service_config_changes_only_its_region_and_its_hash() -> None:
    base = make_cloud()
    changed = make_cloud(regions=[{"name": "RegionOne", "neutron": {"customServiceConfig": "[DEFAULT]\ndebug=true\n"}},
                                  {"name": "RegionTwo"}])
    before, after = region_objs(base), region_objs(changed)
    assert after["cloud-region-regionone-neutron-config"]["stringData"]["custom.conf"].startswith("[DEFAULT]")

    def hash_of(objs, name):
        return objs[name]["spec"]["template"]["metadata"]["annotations"][objects.CONFIG_HASH]

    assert hash_of(before, "cloud-region-regionone-neutron") != hash_of(after, "cloud-region-regionone-neutron")
    two = "cloud-region-regiontwo"
    assert region_objs(base, two) == region_objs(changed, two)


def test_tls_makes_https_and_mounts_the_cert() -> None:
    cloud = make_cloud(tls={"enabled": True, "publicCertSecret": "cert"})
    ids = children(cloud)["cloud-identity"]
    assert objects.identity_endpoints(ids).public.startswith("https://")
    pod = by_name(objects.identity_objects(ids, CREDS))["cloud-identity"]["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "cert"}} in pod["volumes"]
    assert "--certfile" in pod["containers"][0]["command"]


def test_central_network_objects(cloud) -> None:
    kids = children(cloud)
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    listed = objects.central_objects(kids["cloud-central-network"], CREDS, keystone, [("RegionOne", "az1")])
    objs = by_name(listed)
    deployments = {o["metadata"]["name"] for o in listed if o["kind"] == "Deployment"}
    services = {o["metadata"]["name"] for o in listed if o["kind"] == "Service"}
    assert deployments == {"cloud-central-network-neutron", "cloud-central-network-admin-api",
                           "cloud-central-network-xjob"}
    assert "cloud-central-network-admin-api" in services
    conf = ini(objs["cloud-central-network-neutron-config"]["stringData"]["neutron.conf"])
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_central"
    assert conf["DEFAULT"]["service_plugins"] == "isthmus_central_l3"
    admin = objs["cloud-central-network-multiregion"]["spec"]
    assert (admin["serviceType"], admin["region"]) == ("multiregion", "CentralRegion")
    (pods_job,) = [o for o in objs.values() if o["metadata"]["name"].startswith("cloud-central-network-pods-")]
    assert pods_job["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == ["CentralRegion:", "RegionOne:az1"]


def test_the_job_worker_acts_as_the_user_the_local_plugins_keep_regional(cloud) -> None:
    """A region's local plugin keeps the deletes of the user it calls central as in
    the region (the worker deletes copies, never users' ports): the worker must be it."""
    kids = children(cloud)
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    central = by_name(objects.central_objects(kids["cloud-central-network"], CREDS, keystone, []))
    xjob = ini(central["cloud-central-network-xjob-config"]["stringData"]["xjob.conf"])
    for region in ("regionone", "regiontwo"):
        files = region_objs(cloud, f"cloud-region-{region}")[f"cloud-region-{region}-neutron-config"]["stringData"]
        local = ini(files["neutron.conf"])["isthmus_central"]
        for option in ("username", "user_domain_name"):
            assert local[option] == xjob["isthmus_service"][option]


def test_xjob_serves_metrics_where_prometheus_is_told_to_scrape(cloud) -> None:
    kids = children(cloud)
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    objs = by_name(objects.central_objects(kids["cloud-central-network"], CREDS, keystone, []))
    conf = ini(objs["cloud-central-network-xjob-config"]["stringData"]["xjob.conf"])
    assert (conf["metrics"]["port"], conf["metrics"]["bind_host"]) == ("9105", "0.0.0.0")
    template = objs["cloud-central-network-xjob"]["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/port"] == conf["metrics"]["port"]
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    (container,) = template["spec"]["containers"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9105}]
    assert "readinessProbe" not in container  # a metrics port says nothing about readiness


def test_xjob_resyncs_the_gateways_globals_only_where_a_gateway_is_deployed() -> None:
    def xjob_conf(**sections: Any) -> configparser.ConfigParser:
        kids = children(make_cloud(**sections))
        keystone = objects.identity_endpoints(kids["cloud-identity"])
        objs = by_name(objects.central_objects(kids["cloud-central-network"], CREDS, keystone, []))
        return ini(objs["cloud-central-network-xjob-config"]["stringData"]["xjob.conf"])

    assert xjob_conf()["gateway_sync"]["master_region"] == "RegionOne"
    assert xjob_conf(apiGateway={"masterRegion": "RegionTwo"})["gateway_sync"]["master_region"] == "RegionTwo"
    assert "gateway_sync" not in xjob_conf(apiGateway={"enabled": False})


def test_central_ranges_are_rendered() -> None:
    cloud = make_cloud(centralNetwork={"vniRanges": ["1:5000"], "networkVlanRanges": ["physnet1:10:20"]})
    kids = children(cloud)
    objs = by_name(objects.central_objects(kids["cloud-central-network"], CREDS,
                                           objects.identity_endpoints(kids["cloud-identity"])))
    ml2 = ini(objs["cloud-central-network-neutron-config"]["stringData"]["ml2_conf.ini"])
    assert ml2["ml2_type_vxlan"]["vni_ranges"] == "1:5000"
    assert ml2["ml2_type_vlan"]["network_vlan_ranges"] == "physnet1:10:20"


def gateway(cloud, regions: list[str]):
    kids = children(cloud)
    gw = kids["cloud-api-gateway"]
    selected = [kids[f"cloud-region-{r.lower()}"] for r in regions]
    return by_name(objects.gateway_objects(gw, CREDS, objects.identity_endpoints(kids["cloud-identity"]),
                                           objects.gateway_backends(gw, selected), regions))


def test_gateway_serves_the_selected_regions_and_rolls_when_they_change() -> None:
    cloud = make_cloud(regions=[{"name": "RegionOne", "nova": {"enabled": True}}, {"name": "RegionTwo"},
                                {"name": "RegionThree"}])
    two, three = gateway(cloud, ["RegionOne", "RegionTwo"]), gateway(cloud, ["RegionOne", "RegionTwo", "RegionThree"])
    conf = ini(three["cloud-api-gateway-config"]["stringData"]["gateway.conf"])
    assert conf["gateway"]["regions"] == "RegionOne,RegionThree,RegionTwo"  # what the gateway serves
    kids = children(cloud)
    (first,) = objects.gateway_backends(kids["cloud-api-gateway"], [kids["cloud-region-regionone"]])
    assert first.nova_url == "http://cloud-region-regionone-nova-internal.ns1.svc:8774/v2.1"
    assert first.az == "az1"  # the Region's own zone, as registered for every component
    assert not [o for o in three.values() if o["kind"] == "ConfigMap"]  # nothing written that nobody reads

    def hash_of(objs):
        return objs["cloud-api-gateway"]["spec"]["template"]["metadata"]["annotations"][objects.CONFIG_HASH]

    assert hash_of(two) != hash_of(three)
    regs = {o["spec"]["serviceType"]: o["spec"] for o in three.values() if o["kind"] == "EndpointRegistration"}
    assert set(regs) == {"compute", "volumev3"} and regs["compute"]["region"] == "CentralRegion"
    no_cinder = gateway(make_cloud(apiGateway={"cinder": False}), ["RegionOne"])
    assert {o["spec"]["serviceType"] for o in no_cinder.values() if o["kind"] == "EndpointRegistration"} == {"compute"}


def test_gateway_placement_policy_reaches_its_config() -> None:
    def policy(cloud) -> str:
        files = gateway(cloud, ["RegionOne"])["cloud-api-gateway-config"]["stringData"]
        return ini(files["gateway.conf"])["gateway"]["placement_policy"]

    assert policy(make_cloud()) == "fewest_projects"
    assert policy(make_cloud(apiGateway={"placementPolicy": "most_free_capacity"})) == "most_free_capacity"


def test_ccm_cloud_conf(cloud) -> None:
    kids = children(cloud)
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    objs = objects.ccm_objects(kids["cloud-ccm"], ("app-id", "app-secret"), keystone, ["RegionOne", "RegionTwo"])
    conf, env = objs
    assert (conf["metadata"]["namespace"], conf["metadata"]["name"]) == ("kube-system", "cloud-config")
    assert "ownerReferences" not in conf["metadata"]  # cross-namespace: no owner reference
    parsed = parse_config(conf["stringData"]["cloud.conf"])
    assert parsed.global_.auth_url == keystone.public
    assert parsed.global_.application_credential_id == "app-id"
    assert parsed.regions == ("RegionOne", "RegionTwo")
    assert env["data"] == {"OS_CCM_REGIONAL": "true"}
    fewer = objects.ccm_objects(kids["cloud-ccm"], ("app-id", "app-secret"), keystone, ["RegionOne"])
    assert objects.rendered_hash(fewer[:1]) != objects.rendered_hash(objs[:1])


def test_existing_control_plane_snippet_and_patch() -> None:
    cloud = make_cloud(regions=[{"name": "RegionOne", "existingControlPlane": {"name": "openstack"}}])
    kids = children(cloud)
    region = kids["cloud-region-regionone"]
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    objs = objects.region_objects(region, CREDS, keystone)
    assert not [o for o in objs if o["kind"] in ("Deployment", "Job")]
    assert {o["spec"]["serviceType"] for o in objs if o["kind"] == "EndpointRegistration"} == {"identity"}
    snippet = objects.custom_service_config(region, CREDS, keystone)
    conf = ini(snippet)
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_local"
    assert conf["isthmus"]["region_name"] == "RegionOne"
    assert objects.control_plane_patch(snippet) == {"spec": {"neutron": {"template": {"customServiceConfig": snippet}}}}


def test_render_documents_uses_the_secret_and_rejects_invalid_specs(cloud) -> None:
    out = render_documents([cloud, passwords_secret()])
    text = yaml.safe_dump_all(out)
    assert "s3rvice" in text and "$(service-password)" not in text
    placeholders = yaml.safe_dump_all(render_documents([cloud]))
    assert "$(service-password)" in placeholders
    with pytest.raises(ValueError, match="central network's region"):
        render_documents([make_cloud(regions=[{"name": "CentralRegion"}])])


def test_render_is_deterministic_except_generated_keys(cloud) -> None:
    def stable(objs):
        return [o for o in objs if objects.GENERATED not in (o["metadata"].get("annotations") or {})]

    assert stable(render_documents([cloud])) == stable(render_documents([cloud]))


def test_cli_render_and_crds(capsys, tmp_path) -> None:
    from isthmus.cli.main import main

    path = tmp_path / "cloud.yaml"
    path.write_text(yaml.safe_dump_all([make_cloud(), passwords_secret()]))
    assert main(["operator", "render", "-f", str(path)]) == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)]
    assert {"Secret", "ConfigMap", "Deployment", "Service", "Job", "Region"} <= set(kinds)
    assert main(["operator", "crds"]) == 0
    assert len(list(yaml.safe_load_all(capsys.readouterr().out))) == 7


@pytest.mark.parametrize("content,expected", [
    (None, "No such file"),
    ("{{{\n", "while parsing"),
    ("- a\n", "document 1 is a list, not a Kubernetes object"),
])
def test_cli_render_bad_input_is_one_error_line_not_a_traceback(capsys, tmp_path, content, expected) -> None:
    from isthmus.cli.main import main

    path = tmp_path / "cloud.yaml"
    if content is not None:
        path.write_text(content)
    assert main(["operator", "render", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and expected in err and "Traceback" not in err


HARD = "p$w@rd/x:y%z$(HOME)"  # every character that broke a URL, an oslo.config value or a pod env


def oslo_value(text: str, section: str, option: str) -> str:
    """``option`` as oslo.config itself reads it from ``text`` (with its $-substitution)."""
    import tempfile

    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf.register_opts([cfg.StrOpt(option, secret=True)], group=section)
    with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
        f.write(text)
        f.flush()
        conf(args=[], default_config_files=[f.name])
        return str(getattr(getattr(conf, section), option))


def test_passwords_with_url_and_dollar_characters_survive_every_file_and_env(cloud) -> None:
    import sqlalchemy

    creds = objects.Credentials(admin_password=HARD, service_password=HARD, database_password=HARD,
                                transport_url="rabbit://u:p%24$x@rabbit:5672/")
    kids = children(cloud)
    keystone = objects.identity_endpoints(kids["cloud-identity"])
    central = by_name(objects.central_objects(kids["cloud-central-network"], creds, keystone, [("RegionOne", "az1")]))
    neutron_conf = central["cloud-central-network-neutron-config"]["stringData"]["neutron.conf"]
    url = sqlalchemy.engine.make_url(oslo_value(neutron_conf, "database", "connection"))
    assert (url.password, url.host, url.database) == (HARD, "db.example", "neutron_central")
    assert oslo_value(neutron_conf, "DEFAULT", "transport_url") == "rabbit://u:p%24$x@rabbit:5672/"
    assert oslo_value(neutron_conf, "keystone_authtoken", "password") == HARD
    registry = sqlalchemy.engine.make_url(central["cloud-central-network-isthmus-db"]["stringData"]["url"])
    assert registry.password == HARD
    # the Jobs read that URL from the Secret, never from a plain value in their spec
    jobs = [o for o in central.values() if o["kind"] in ("Job", "Deployment")]
    assert len(jobs) == 5 and not [o["metadata"]["name"] for o in jobs if HARD in json.dumps(o)]
    region = by_name(objects.region_objects(kids["cloud-region-regionone"], creds, keystone))
    local = region["cloud-region-regionone-neutron-config"]["stringData"]["neutron.conf"]
    assert sqlalchemy.engine.make_url(oslo_value(local, "database", "connection")).password == HARD


def test_plain_pod_env_values_are_escaped_for_kubelet_expansion() -> None:
    pod = objects.Pod("c", "img", ["true"], env=(("A", "x$(HOME)$y"),))
    (env,) = objects.pod_spec({}, pod)["containers"][0]["env"]
    assert env == {"name": "A", "value": "x$$(HOME)$$y"}  # kubelet turns $$ back into $
