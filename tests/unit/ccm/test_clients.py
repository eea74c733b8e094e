"""Client layer: auth plugin choice, lazy isolated per-region clients, SDK mapping.

No network: the catalog comes from a keystoneauth token fixture and the SDK
proxies are stubs raising the SDK's own exceptions. Real Nova/Neutron are the
integration tests' business.
"""

from __future__ import annotations

from typing import Any

import pytest
from keystoneauth1 import access, fixture, session
from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1.identity import base, generic, v3
from openstack import exceptions as sdk_exc
from openstack.compute.v2.flavor import Flavor as SdkFlavor
from openstack.compute.v2.server import Server as SdkServer
from openstack.network.v2.network import Network as SdkNetwork
from openstack.network.v2.port import Port as SdkPort

from isthmus.ccm.config import AuthOptions, parse_config
from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.clients import (
    OpenStackClients,
    OpenStackRegionClient,
    build_auth,
    build_session,
    exact_name_filter,
)
from isthmus.ccm.openstack.model import Server, ServerAddress


class StaticAuth(base.BaseIdentityPlugin):
    """A token whose catalog we choose; counts how often it "authenticates"."""

    def __init__(self, token: fixture.V3Token) -> None:
        super().__init__(auth_url="http://keystone/v3")
        self.token = token
        self.auth_calls = 0

    def get_auth_ref(self, session: Any, **kwargs: Any) -> access.AccessInfo:
        self.auth_calls += 1
        return access.create(body=self.token, auth_token="static-token")


def catalog_token() -> fixture.V3Token:
    token = fixture.V3Token()
    token.set_project_scope()
    compute = token.add_service("compute")
    network = token.add_service("network")
    for region in ("RegionOne", "RegionTwo"):
        compute.add_standard_endpoints(public=f"http://nova.{region}/v2.1", region=region)
        network.add_standard_endpoints(public=f"http://neutron.{region}", region=region)
    compute.add_standard_endpoints(public="http://nova.RegionThree/v2.1", region="RegionThree")  # no network
    return token


def make_clients(regions: tuple[str, ...]) -> tuple[OpenStackClients, StaticAuth, list[str]]:
    auth = StaticAuth(catalog_token())
    made: list[str] = []

    def connect(sess: Any, region: str, interface: str) -> object:
        made.append(region)
        assert interface == "public"
        return object()

    return OpenStackClients(session.Session(auth=auth), regions, "public", connect), auth, made


def test_clients_are_lazy_cached_and_isolated() -> None:
    clients, auth, made = make_clients(("RegionOne", "RegionTwo", "RegionThree", "RegionFour"))
    assert made == [] and auth.auth_calls == 0  # nothing until first use
    one = clients.client("RegionOne")
    assert clients.client("RegionOne") is one and made == ["RegionOne"]
    with pytest.raises(RegionError, match="region RegionThree: no network endpoint"):
        clients.client("RegionThree")
    with pytest.raises(RegionError, match="region RegionFour: no compute endpoint"):
        clients.client("RegionFour")
    assert clients.client("RegionTwo").region == "RegionTwo"
    assert made == ["RegionOne", "RegionTwo"]
    assert auth.auth_calls == 1  # one authentication shared by every region
    with pytest.raises(RegionError, match="not a configured region"):
        clients.client("Elsewhere")


def test_check_reports_per_region() -> None:
    clients, _, _ = make_clients(("RegionOne", "RegionThree"))
    report = clients.check()
    assert report["RegionOne"] is None
    assert "no network endpoint" in (report["RegionThree"] or "")


def test_failed_region_is_retried_later() -> None:
    clients, auth, _ = make_clients(("RegionOne", "RegionFour"))
    with pytest.raises(RegionError):
        clients.client("RegionFour")
    auth.token.add_service("compute").add_standard_endpoints(public="http://nova.RegionFour", region="RegionFour")
    auth.token.add_service("network").add_standard_endpoints(public="http://neutron.RegionFour", region="RegionFour")
    auth.invalidate()  # as a token renewal would
    assert clients.client("RegionFour").region == "RegionFour"


def test_auth_plugin_choice() -> None:
    pw = build_auth(AuthOptions(auth_url="http://k/v3", username="u", password="p", tenant_name="demo",
                                domain_name="Default"))
    assert isinstance(pw, generic.Password)
    got = vars(pw)  # keystoneauth keeps its options in private attributes
    assert (got["_username"], got["_user_domain_name"], got["_project_name"], got["_project_domain_name"]) == (
        "u", "Default", "demo", "Default")
    assert got["_domain_name"] is None  # project scope wins over domain scope
    trust = build_auth(AuthOptions(auth_url="http://k/v3", user_id="uid", password="p", trust_id="t"))
    assert isinstance(trust, generic.Password) and vars(trust)["_trust_id"] == "t"
    tok = build_auth(AuthOptions(auth_url="http://k/v3", token="tkn", tenant_id="pid"))
    assert isinstance(tok, generic.Token) and vars(tok)["_project_id"] == "pid"
    app = build_auth(AuthOptions(auth_url="http://k/v3", application_credential_id="ac",
                                 application_credential_secret="s"))
    assert isinstance(app, v3.ApplicationCredential)


def test_session_options() -> None:
    cfg = parse_config("[Global]\nregion=R\ntls-insecure=true\n[Metadata]\nrequest-timeout=7s\n", environ={})
    sess = build_session(cfg, auth=StaticAuth(catalog_token()))
    assert sess.verify is False and sess.timeout == 7.0
    cfg = parse_config("[Global]\nregion=R\nca-file=/ca.pem\ntls-insecure=True\n", environ={})
    assert build_session(cfg, auth=StaticAuth(catalog_token())).verify == "/ca.pem"  # only "true" disables


def test_exact_name_filter_quotes_regex() -> None:
    assert exact_name_filter("web-1.example(a)") == r"^web-1\.example\(a\)$"


# --- SDK mapping ------------------------------------------------------------

SERVER_BODY: dict[str, Any] = {
    "id": "i1",
    "name": "node-1",
    "status": "SHUTOFF",
    "OS-EXT-AZ:availability_zone": "nova",
    "flavor": {"original_name": "m1.small", "vcpus": 1},
    "addresses": {"private": [{"addr": "10.0.0.5", "OS-EXT-IPS:type": "fixed", "version": 4},
                              {"addr": "172.24.4.5", "version": 4}]},
    "accessIPv4": "1.2.3.4",
    "metadata": {"hostname": "h"},
}


class Raises:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self.exc


class Stub:
    def __init__(self, **methods: Any) -> None:
        self.__dict__.update(methods)


def conn(compute: Stub | None = None, network: Stub | None = None) -> Stub:
    return Stub(compute=compute or Stub(), network=network or Stub())


def test_server_mapping() -> None:
    c = OpenStackRegionClient("R", conn(Stub(get_server=lambda i: SdkServer.existing(**SERVER_BODY))))
    assert c.get_server("i1") == Server(
        id="i1", name="node-1", status="SHUTOFF", availability_zone="nova", flavor={"original_name": "m1.small"},
        addresses={"private": (ServerAddress("10.0.0.5", "fixed"), ServerAddress("172.24.4.5", ""))},
        access_ipv4="1.2.3.4", metadata={"hostname": "h"},
    )
    old = OpenStackRegionClient("R", conn(Stub(get_server=lambda i: SdkServer.existing(id="i2", flavor={"id": "f"}))))
    pre_247 = old.get_server("i2")
    assert pre_247 is not None and pre_247.flavor == {"id": "f"}  # pre-2.47 answer


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (sdk_exc.NotFoundException("404 not found"), None),
        (sdk_exc.HttpException("500 boom", http_status=500), "region R: GET server x: 500 boom"),
        (ksa_exc.ConnectFailure("refused"), "region R: GET server x: refused"),
        (ksa_exc.EndpointNotFound("no endpoint"), "region R: GET server x: no endpoint"),
    ],
)
def test_errors_map_to_none_or_region_error(exc: Exception, outcome: str | None) -> None:
    c = OpenStackRegionClient("R", conn(Stub(get_server=Raises(exc))))
    if outcome is None:
        assert c.get_server("x") is None
    else:
        with pytest.raises(RegionError) as err:
            c.get_server("x")
        assert str(err.value) == outcome and err.value.region == "R"


def test_find_servers_keeps_exact_names_and_passes_regex() -> None:
    seen: dict[str, Any] = {}

    def servers(**query: Any) -> list[SdkServer]:
        seen.update(query)
        return [SdkServer.existing(id="a", name="node-1"), SdkServer.existing(id="b", name="node-10")]

    c = OpenStackRegionClient("R", conn(Stub(servers=servers)))
    assert [s.id for s in c.find_servers("node-1")] == ["a"]
    assert seen == {"details": True, "name": "^node-1$"}
    broken = OpenStackRegionClient("R", conn(Stub(servers=Raises(sdk_exc.HttpException("503", http_status=503)))))
    with pytest.raises(RegionError, match="region R: list servers"):
        broken.find_servers("node-1")


def test_network_mapping() -> None:
    port = SdkPort.existing(id="p", status="ACTIVE", network_id="n", fixed_ips=[{"ip_address": "10.0.0.5"}],
                            trunk_details={"trunk_id": "t", "sub_ports": [{"port_id": "sp"}]})
    net = Stub(ports=lambda device_id: [port], get_port=lambda i: port,
               get_network=lambda i: SdkNetwork.existing(id=i, name="vlan"))
    c = OpenStackRegionClient("R", conn(Stub(get_flavor=lambda i: SdkFlavor.existing(id=i, name="m1")), net))
    (mapped,) = c.list_ports("dev")
    assert (mapped.fixed_ips, mapped.subport_ids, mapped.network_id) == (("10.0.0.5",), ("sp",), "n")
    network, flavor = c.get_network("n"), c.get_flavor("f")
    assert network is not None and network.name == "vlan"
    assert flavor is not None and flavor.name == "m1"


def test_a_region_keystone_does_not_know_is_unknown_a_region_in_the_catalog_never(monkeypatch) -> None:
    """Issue 26 item 11: a misspelt region in ``regions=`` was only a warning at start."""
    clients, _, _ = make_clients(("RegionOne", "RegionThree", "RegionOen", "RegionFive"))
    asked = []

    class Reply:
        def __init__(self, status: int) -> None:
            self.status_code = status

    def get(path: str, **kwargs: Any) -> Reply:
        asked.append(path)
        return Reply(200 if path == "/regions/RegionFive" else 404)  # RegionFive: known, no endpoints yet

    monkeypatch.setattr(clients.session, "get", get)
    assert clients.unknown_regions() == ["RegionOen"]
    assert asked == ["/regions/RegionOen", "/regions/RegionFive"]  # catalog regions cost no call
