"""Every outbound call is bounded by default; an explicit session timeout wins."""

from __future__ import annotations

import pytest
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from isthmus.clients import NeutronClient, RegionClients, load_session
from isthmus.clients.neutron import DEFAULT_TIMEOUT
from isthmus.clients.regions import register_auth_opts

from .fakes import FakeAdapter, Response, as_adapter, paged_server


def test_every_request_carries_the_default_timeout():
    server = paged_server("ports", [{"id": f"p{i}"} for i in range(5)], page_size=2)

    def answer(call):
        if call.method == "GET" and call.url == "/v2.0/ports":
            return server(call)
        return Response(200, {"port": {"id": "p0"}, "ports": [{"id": "p0"}]})
    http = FakeAdapter(answer)
    neutron = NeutronClient(as_adapter(http), "RegionOne")
    neutron.list("ports")
    neutron.get("ports", "p0")
    neutron.create("ports", {"network_id": "n"})
    neutron.create_many("ports", [{"network_id": "n"}])
    neutron.update("ports", "p0", {"name": "x"})
    neutron.delete("ports", "p0")
    assert len(http.calls) == 8
    assert all(c.kwargs.get("timeout") == DEFAULT_TIMEOUT for c in http.calls)


def test_a_nonpositive_timeout_is_refused():
    with pytest.raises(ValueError):
        NeutronClient(as_adapter(FakeAdapter(lambda c: Response(200, {}))), "RegionOne", timeout=0)


def test_region_clients_bound_a_session_without_timeout_including_token_requests():
    session = ks_session.Session()  # keystoneauth's default: no timeout at all
    assert session.timeout is None
    clients = RegionClients(session, timeout=7)
    assert session.timeout == 7.0  # the session's timeout is what token requests use
    assert clients.neutron("RegionOne").timeout == 7.0


def test_region_clients_keep_a_session_timeout_set_by_the_operator():
    session = ks_session.Session(timeout=42)
    clients = RegionClients(session, timeout=7)
    assert session.timeout == 42.0 and clients.neutron("RegionOne").timeout == 42.0


def _conf(tmp_path, extra: str = "") -> cfg.ConfigOpts:
    path = tmp_path / "isthmus.conf"
    path.write_text("[svc]\nauth_type = password\nauth_url = http://keystone:5000/v3\n"
                    f"username = u\npassword = p\n{extra}")
    conf = cfg.ConfigOpts()
    register_auth_opts(conf, "svc")
    conf(["--config-file", str(path)], project="isthmus-test")
    return conf


def test_load_session_applies_the_default_unless_the_group_sets_one(tmp_path):
    assert load_session(_conf(tmp_path), "svc", default_timeout=9).timeout == 9.0
    assert load_session(_conf(tmp_path, "timeout = 3\n"), "svc", default_timeout=9).timeout == 3.0
    assert load_session(_conf(tmp_path), "svc").timeout is None  # unchanged for callers without a default


@pytest.mark.parametrize("extra, expected", [
    ("", DEFAULT_TIMEOUT),
    ("[isthmus]\nregion_timeout = 4\n", 4.0),
    ("[isthmus]\nregion_timeout = 4\n[isthmus_service]\ntimeout = 2\n", 2.0),
])
def test_the_worker_bounds_its_region_calls(tmp_path, extra, expected):
    from isthmus.jobs import config as jobs_config
    from isthmus.network.reconcilers.settings import register_opts
    from isthmus.network.reconcilers.worker import build_handlers

    path = tmp_path / "isthmus.conf"
    path.write_text(f"[database]\nconnection = sqlite:///{tmp_path}/i.sqlite\n"
                    "[isthmus_service]\nauth_type = password\nauth_url = http://keystone:5000/v3\n"
                    f"username = u\npassword = p\n{extra}")
    conf = cfg.ConfigOpts()
    jobs_config.register_opts(conf)
    register_opts(conf)
    conf(["--config-file", str(path)], project="isthmus-test")
    regions = build_handlers(conf).network_sync.regions
    assert regions.clients.session.timeout == expected
    assert regions.neutron("RegionOne").timeout == expected


def test_a_region_that_failed_is_not_tried_again_until_the_cooldown_passes():
    from keystoneauth1 import exceptions as ks_exc

    from isthmus.breaker import Breaker
    from isthmus.clients.neutron import Unavailable

    now = [0.0]
    up = [False]

    def answer(call):
        if not up[0]:
            raise ks_exc.ConnectTimeout("hangs")
        return Response(200, {"port": {"id": "p0"}})

    http = FakeAdapter(answer)
    neutron = NeutronClient(as_adapter(http), "RegionTwo", breaker=Breaker(cooldown=10, clock=lambda: now[0]))
    with pytest.raises(Unavailable, match="unreachable"):
        neutron.get("ports", "p0")
    up[0] = True
    with pytest.raises(Unavailable, match="not tried for another 10s"):
        neutron.get("ports", "p0")
    assert len(http.calls) == 1  # failed fast, no second timeout spent
    now[0] = 10.5
    assert neutron.get("ports", "p0") == {"id": "p0"}  # the trial call goes through and closes it
    assert neutron.get("ports", "p0") == {"id": "p0"} and len(http.calls) == 3


def test_after_the_cooldown_only_one_trial_goes_to_a_sick_region_and_its_verdict_decides():
    from isthmus.breaker import Breaker

    now = [0.0]
    breaker = Breaker(cooldown=10, clock=lambda: now[0], trial_timeout=60)
    assert breaker.admit() == 0  # closed
    breaker.failed()
    assert breaker.admit() > 0  # open
    now[0] = 10.5
    assert breaker.admit() == 0  # the trial
    assert all(breaker.admit() > 0 for _ in range(5))  # everyone else waits for its verdict
    breaker.failed()  # still sick: open again for a whole cooldown
    now[0] = 15.0
    assert breaker.admit() > 0
    now[0] = 21.0
    assert breaker.admit() == 0 and breaker.admit() > 0
    breaker.succeeded()
    assert breaker.admit() == 0 and breaker.admit() == 0  # closed: everyone goes


def test_a_trial_that_never_reports_is_given_up():
    from isthmus.breaker import Breaker

    now = [0.0]
    breaker = Breaker(cooldown=10, clock=lambda: now[0], trial_timeout=60)
    breaker.failed()
    now[0] = 11.0
    assert breaker.admit() == 0  # the trial's caller is then cancelled without a verdict...
    breaker.abandoned()
    assert breaker.admit() == 0  # ...so the next caller is the trial
    now[0] = 80.0  # and a trial lost without even that is replaced after trial_timeout
    assert breaker.admit() == 0


def test_a_breaker_with_a_threshold_opens_only_after_that_many_failures_in_a_row():
    from isthmus.breaker import Breaker

    now = [0.0]
    breaker = Breaker(cooldown=10, clock=lambda: now[0], threshold=3)
    breaker.failed()
    breaker.failed()
    assert breaker.admit() == 0  # a busy service answering late twice is not a sick one
    breaker.succeeded()
    breaker.failed()
    breaker.failed()
    assert breaker.admit() == 0  # the count starts again after a success
    breaker.failed()
    assert breaker.admit() > 0  # three in a row: open
    now[0] = 10.5
    assert breaker.admit() == 0  # the trial...
    breaker.failed()
    assert breaker.admit() > 0  # ...failed: open again at once, no new threshold to reach


def test_a_call_that_timed_out_while_the_service_answered_others_is_busy_not_sick():
    from isthmus.breaker import Breaker

    now = [0.0]
    breaker = Breaker(cooldown=10, clock=lambda: now[0])
    started = breaker.now()
    now[0] = 5.0
    breaker.succeeded()  # another call was answered while this one waited
    now[0] = 10.0
    breaker.failed(since=started)
    assert breaker.admit() == 0  # busy: still closed
    started = breaker.now()
    now[0] = 20.0
    breaker.failed(since=started)  # nothing answered since it began: hung
    assert breaker.admit() > 0


def _in_thread(fn):
    """Run ``fn`` in another thread (another caller) and return its result."""
    import threading

    result = []
    worker = threading.Thread(target=lambda: result.append(fn()))
    worker.start()
    worker.join()
    return result[0] if result else None


def test_a_stragglers_failure_or_cancellation_does_not_end_the_trial():
    """Issue 25 hole 7: a call admitted before the breaker opened ends late while
    a trial is under way. Before: its failed() or abandoned() cleared the trial
    and let a second trial go to the sick service."""
    from isthmus.breaker import Breaker

    now = [0.0]
    breaker = Breaker(cooldown=10, clock=lambda: now[0], trial_timeout=60)
    breaker.failed()
    now[0] = 10.5
    assert breaker.admit() == 0  # this thread is the trial
    _in_thread(breaker.abandoned)  # another caller's cancelled call
    assert _in_thread(breaker.admit) > 0  # still one trial only
    _in_thread(breaker.failed)  # another caller's late failure
    assert _in_thread(breaker.admit) > 0
    breaker.failed()  # the trial's own verdict re-opens it
    assert breaker.admit() > 0 and breaker.state() == "open"


def test_one_slow_call_among_answered_ones_does_not_fail_every_call():
    """Issue 25 hole 7: threshold 1, one central call times out while others are
    answered. Before: the client reported it without its start, and every
    central call of that neutron-server failed fast for the cooldown."""
    from keystoneauth1 import exceptions as ks_exc

    from isthmus.breaker import Breaker

    now = [0.0]
    slow = [True]

    def answer(call):
        if call.url.endswith("/slow") and slow[0]:
            # While it waits, another caller is answered.
            _in_thread(lambda: neutron.get("ports", "fast"))
            now[0] += 10
            raise ks_exc.ConnectTimeout("timed out")
        now[0] += 0.1
        return Response(200, {"port": {"id": "fast"}})

    neutron = NeutronClient(as_adapter(FakeAdapter(answer)), "CentralRegion",
                            breaker=Breaker(cooldown=10, clock=lambda: now[0]))
    from isthmus.clients.neutron import Unavailable

    with pytest.raises(Unavailable, match="unreachable"):
        neutron.get("ports", "slow")
    assert neutron.breaker.state() == "closed"
    assert neutron.get("ports", "fast") == {"id": "fast"}
