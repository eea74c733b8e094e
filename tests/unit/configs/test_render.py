"""The shared renderer: INI read back with configparser, cloud.conf with the CCM's reader."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import pytest

from isthmus.ccm.config import parse_config
from isthmus.configs import cloudconf, compute, ini, neutron, services
from isthmus.configs.ini import ServiceUser

USER = ServiceUser("http://keystone-internal:5000/v3", "neutron", "pw", "RegionOne",
                   public_auth_url="https://keystone.example.com/v3")


def parse(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parser


def local_values(**overrides) -> neutron.NeutronValues:
    base = dict(role=neutron.LOCAL, region="RegionOne", central_region="CentralRegion", service_user=USER,
                database_connection="mysql+pymysql://neutron:pw@db/neutron", transport_url="rabbit://r",
                central_client=USER.in_region("RegionOne"), availability_zone="az1", vni_ranges="100000:199999")
    return neutron.NeutronValues(**{**base, **overrides})


def test_local_neutron_conf_parses_back() -> None:
    conf = parse(ini.render(neutron.neutron_conf(local_values())))
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_local"
    assert conf["DEFAULT"]["service_plugins"] == "router"
    assert conf["keystone_authtoken"]["www_authenticate_uri"] == "https://keystone.example.com/v3"
    assert conf["keystone_authtoken"]["auth_url"] == "http://keystone-internal:5000/v3"
    assert conf["keystone_authtoken"]["region_name"] == "RegionOne"
    assert conf["isthmus"]["central_region"] == "CentralRegion"
    assert conf["isthmus"]["availability_zone"] == "az1"
    assert conf["isthmus_central"]["timeout"] == "30"
    # Production leaves Neutron's agent settings alone (the sandbox turns them off).
    assert "rpc_workers" not in conf["DEFAULT"] and not conf.has_section("agent")
    assert not conf.has_section("quotas")


def test_central_neutron_has_central_plugins() -> None:
    values = local_values(role=neutron.CENTRAL, region="CentralRegion", central_client=None,
                          isthmus_database_connection="sqlite://")
    conf = parse(ini.render(neutron.neutron_conf(values)))
    ml2 = parse(ini.render(neutron.ml2_conf(values)))
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_central"
    assert conf["DEFAULT"]["service_plugins"] == "isthmus_central_l3"
    assert ml2["ml2"]["mechanism_drivers"] == "isthmus_central"
    assert not conf.has_section("isthmus_central")


def test_nova_conf_keeps_every_client_in_its_region() -> None:
    user = ServiceUser("http://keystone-internal:5000/v3", "nova", "pw", "RegionTwo", "https://keystone.example.com/v3")
    conf = parse(ini.render(ini.prune(compute.nova_conf(compute.NovaValues(
        transport_url="rabbit://r", database_connection="mysql+pymysql://n@db/nova",
        api_database_connection="mysql+pymysql://n@db/nova_api", service_user=user, availability_zone="az2")))))
    assert conf["DEFAULT"]["default_availability_zone"] == "az2"
    assert conf["api_database"]["connection"].endswith("/nova_api")
    assert conf["keystone_authtoken"]["www_authenticate_uri"] == "https://keystone.example.com/v3"
    assert (conf["placement"]["username"], conf["neutron"]["username"]) == ("placement", "neutron")
    for section in ("keystone_authtoken", "service_user", "placement", "neutron"):
        assert conf[section]["region_name"] == "RegionTwo", section
    assert conf["glance"]["region_name"] == conf["cinder"]["os_region_name"] == "RegionTwo"
    assert conf["service_user"]["send_service_user_token"] == "true"


def test_cinder_conf_calls_nova_of_its_region() -> None:
    user = ServiceUser("http://k:5000/v3", "cinder", "pw", "RegionOne")
    conf = parse(ini.render(compute.cinder_conf(compute.CinderValues(
        transport_url="rabbit://r", database_connection="mysql+pymysql://c@db/cinder", service_user=user,
        availability_zone="az1"))))
    assert conf["DEFAULT"]["storage_availability_zone"] == conf["DEFAULT"]["default_availability_zone"] == "az1"
    assert (conf["nova"]["username"], conf["nova"]["region_name"], conf["nova"]["interface"]) == (
        "nova", "RegionOne", "internal")


def test_overlay_adds_and_replaces_options_per_section() -> None:
    base: dict[str, dict[str, Any]] = {"DEFAULT": {"a": 1, "b": 2}, "x": {"k": "v"}}
    assert ini.overlay(base, {"DEFAULT": {"b": 3, "c": 4}, "y": {"n": 1}}) == {
        "DEFAULT": {"a": 1, "b": 3, "c": 4}, "x": {"k": "v"}, "y": {"n": 1}}
    assert base["DEFAULT"] == {"a": 1, "b": 2}  # not modified


def test_local_needs_a_central_client() -> None:
    with pytest.raises(ValueError):
        local_values(central_client=None)


def test_custom_service_config_snippet_loads_local_plugin_only() -> None:
    conf = parse(neutron.custom_service_config(local_values()))
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_local"
    assert conf["isthmus"]["region_name"] == "RegionOne"
    assert not conf.has_section("database") and not conf.has_section("keystone_authtoken")
    with pytest.raises(ValueError):
        neutron.custom_service_config(local_values(role=neutron.PLAIN))


def test_xjob_without_tuning_leaves_defaults() -> None:
    values = services.XJobValues("sqlite://", "CentralRegion", USER)
    sections = ini.prune(services.xjob_conf(values))
    assert "jobs" not in sections
    assert parse(ini.render(sections))["isthmus"]["central_region"] == "CentralRegion"


def test_keystone_memcache() -> None:
    values = services.KeystoneValues("mysql://k", "/etc/keystone/fernet-keys", "/etc/keystone/credential-keys",
                                     memcache_servers=("mc-0:11211", "mc-1:11211"))
    conf = parse(ini.render(ini.prune(services.keystone_conf(values))))
    assert conf["cache"]["memcache_servers"] == "mc-0:11211,mc-1:11211"
    assert not conf.has_section("identity")


def test_cloud_conf_reads_back_with_the_ccm_reader() -> None:
    text = cloudconf.cloud_conf(cloudconf.CloudConfValues(
        auth_url="https://keystone.example.com/v3", region="RegionOne", regions=("RegionOne", "RegionTwo"),
        application_credential_id="abc", application_credential_secret='se"cr;et#', floating_network_id="fip"))
    config = parse_config(text)
    assert config.global_.auth_url == "https://keystone.example.com/v3"
    assert config.global_.application_credential_secret == 'se"cr;et#'
    assert config.regions == ("RegionOne", "RegionTwo")
    assert not config.warnings


def test_renderer_never_imports_the_sandbox() -> None:
    package = Path(ini.__file__).parent
    for source in package.glob("*.py"):
        assert "isthmus.sandbox" not in source.read_text(), source


def test_an_ovn_region_runs_ml2_ovn_with_its_databases_and_ovns_router_plugin() -> None:
    values = local_values(mechanism_drivers="ovn", tenant_network_types="geneve",
                          ovn=neutron.OvnValues("tcp:10.0.0.1:6641", "tcp:10.0.0.1:6642"))
    conf = parse(ini.render(neutron.neutron_conf(values)))
    assert conf["DEFAULT"]["service_plugins"] == "ovn-router"
    ml2 = parse(ini.render(neutron.ml2_conf(values)))
    assert ml2["ovn"]["ovn_nb_connection"] == "tcp:10.0.0.1:6641"
    assert ml2["ovn"]["ovn_sb_connection"] == "tcp:10.0.0.1:6642"
    assert ml2["ovn"]["ovn_metadata_enabled"] == "false"
    assert ml2["ml2_type_geneve"]["max_header_size"] == "38"  # Neutron refuses to start with less on OVN
    assert "ovn" not in parse(ini.render(neutron.ml2_conf(local_values())))


def test_the_worker_gets_one_section_per_ovn_region() -> None:
    values = services.XJobValues(database_connection="sqlite://", central_region="CentralRegion",
                                 service_user=USER, ovn_regions={"RegionTwo": ("tcp:b:6641", "tcp:b:6642")})
    conf = parse(ini.render(services.xjob_conf(values)))
    section = conf["ovn:RegionTwo"]
    assert (section["nb_connection"], section["sb_connection"]) == ("tcp:b:6641", "tcp:b:6642")
