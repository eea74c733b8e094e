"""Nova's word on a server: only its own "not found" says gone."""

from __future__ import annotations

import pytest

from isthmus.clients import NovaClient, RegionClients, Unavailable
from isthmus.clients.neutron import DEFAULT_TIMEOUT

from .fakes import FakeAdapter, Response, as_adapter


def nova(status: int, body=None) -> tuple[NovaClient, FakeAdapter]:
    http = FakeAdapter(lambda call: Response(status, body))
    return NovaClient(as_adapter(http), "RegionOne"), http


def test_itemnotfound_is_gone_and_a_server_is_not():
    gone, http = nova(404, {"itemNotFound": {"code": 404, "message": "Instance vm1 could not be found."}})
    assert gone.server_gone("vm1") is True
    assert (http.calls[0].method, http.calls[0].url, http.calls[0].kwargs["timeout"]) == \
        ("GET", "/servers/vm1", DEFAULT_TIMEOUT)
    there, _ = nova(200, {"server": {"id": "vm1", "status": "SOFT_DELETED"}})
    assert there.server_gone("vm1") is False


@pytest.mark.parametrize(("status", "body"), [
    (404, {"message": "The resource could not be found."}),  # the URL, not the server (wrong endpoint)
    (404, None), (500, {"computeFault": {}}), (503, None), (401, {"error": {}})])
def test_anything_else_is_no_answer(status, body):
    client, _ = nova(status, body)
    with pytest.raises(Unavailable):
        client.server_gone("vm1")


@pytest.mark.parametrize("bad", ["", "..", "a/b"])
def test_an_id_no_server_can_have_is_refused_before_any_request(bad):
    client, http = nova(200, {})
    with pytest.raises(ValueError):
        client.server_gone(bad)
    assert http.calls == []


def test_region_clients_make_one_nova_client_per_region():
    from keystoneauth1 import session as ks_session

    clients = RegionClients(ks_session.Session(), timeout=7)
    assert clients.nova("RegionOne") is clients.nova("RegionOne")
    assert clients.nova("RegionOne").timeout == 7.0 and clients.nova("RegionTwo").region == "RegionTwo"
