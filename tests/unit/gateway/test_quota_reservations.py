"""Quota reservations: concurrent creates in any gateway process never overshoot."""

import threading
from contextlib import ExitStack
from datetime import datetime, timedelta

import pytest

from isthmus.db import make_engine
from isthmus.gateway import schema
from isthmus.gateway.quotas import Awaiting, Exceeded, Reservations, nova_has_it, units_that_fit
from tests.dbservers import BACKENDS, Unreachable, empty_database

LIMITS = {"instances": 3}


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    """The lock differs per dialect (SQLite's write lock, a row lock elsewhere): all three."""
    with ExitStack() as stack:
        try:
            url = stack.enter_context(empty_database(request.param, tmp_path, "isthmus_quota"))
        except Unreachable as exc:
            pytest.skip(f"{request.param} server unreachable: {exc}")
        engine = make_engine(url)
        schema.create_schema(engine)
        engine.dispose()
        yield url


def now():
    return datetime.utcnow()


def test_concurrent_reservations_from_many_processes_admit_exactly_what_fits(db_url):
    # One engine per thread: as many gateway processes sharing the database.
    admitted, refused = [], []

    def one_process():
        store = Reservations(make_engine(db_url))
        try:
            admitted.append(store.reserve("compute", "p", LIMITS, {"instances": 1}, {"instances": 1}, now(), 60))
        except Exceeded:
            refused.append(1)

    threads = [threading.Thread(target=one_process) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 2 and len(refused) == 6  # 1 in use + 2 reserved = the limit of 3


def test_a_settled_reservation_counts_only_for_readings_that_may_miss_it(db_url):
    store = Reservations(make_engine(db_url))
    before = now() - timedelta(seconds=1)
    rid, _ = store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, before, 60)
    store.settle(rid, created=True)
    # A reading that started before the create finished may not show it: counted.
    with pytest.raises(Exceeded) as over:
        store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, before, 60)
    assert over.value.resource == "instances" and over.value.used == 2
    # A reading that started after it finished includes it in the region's usage: not counted twice.
    store.reserve("compute", "p", LIMITS, {"instances": 2}, {"instances": 1}, now() + timedelta(seconds=1), 60)


def test_a_server_made_counts_until_nova_counts_it_then_only_for_earlier_readings(db_url):
    """CI saw 3 servers made under a limit of 2: a create settled at its 202 stopped
    counting, while Nova's usage showed the server only once it left the scheduler."""
    store = Reservations(make_engine(db_url))
    rid, _ = store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, now(), 60)
    store.await_count(rid, "RegionTwo", {"server": "s1"}, 60)
    assert store.awaiting("compute", "p") == [Awaiting(rid, "RegionTwo", {"server": "s1"})]
    assert store.awaiting("compute", "q") == [] and store.awaiting("volume", "p") == []
    later = now() + timedelta(seconds=1)
    # The 202 came, Nova's usage still shows 0: counted, however late the reading.
    with pytest.raises(Exceeded):
        store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, later, 60)
    # Seen out of the scheduler: readings started after that show it in Nova's usage.
    seen = now()
    store.settle_counted([rid], seen)
    assert store.awaiting("compute", "p") == []
    store.reserve("compute", "p", LIMITS, {"instances": 2}, {"instances": 1}, seen + timedelta(seconds=1), 60)
    with pytest.raises(Exceeded):  # a reading started before it may not
        store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, seen - timedelta(seconds=1), 60)


def test_a_reservation_awaiting_its_count_still_expires(db_url):
    store = Reservations(make_engine(db_url))
    rid, _ = store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)
    store.await_count(rid, "RegionOne", {"server": "s1"}, -1)
    assert store.awaiting("compute", "p") == []
    store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)


@pytest.mark.parametrize("actions,counted", [
    ({"instanceActions": []}, False),  # a build request, or not yet recorded in its cell
    ({"instanceActions": [{"action": "create", "instance_uuid": "a"}]}, True),
    ({}, False),
])
def test_nova_counts_a_server_once_its_create_is_recorded_in_its_cell(actions, counted):
    assert nova_has_it(actions) is counted


def test_a_create_that_made_nothing_gives_its_reservation_back(db_url):
    store = Reservations(make_engine(db_url))
    rid, _ = store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)
    store.settle(rid, created=False)
    store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)


def test_projects_and_services_do_not_share_reservations(db_url):
    store = Reservations(make_engine(db_url))
    store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)
    store.reserve("compute", "q", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)
    store.reserve("volume", "p", {"volumes": 3}, {"volumes": 0}, {"volumes": 3}, now(), 60)


def test_an_unsettled_reservation_expires(db_url):
    store = Reservations(make_engine(db_url))
    store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), -1)  # already expired
    store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)


def test_concurrent_multi_creates_reserve_every_server_they_may_make(db_url):
    """Issue 26 item 1: two boots with ``min_count=1, max_count=10`` under an instance
    limit of 10 each reserved 1 and Nova made 10 in each region (20)."""
    limits = {"instances": 10, "cores": 40}
    made, refused = [], []

    def one_process():
        store = Reservations(make_engine(db_url))
        try:
            _, count = store.reserve("compute", "p", limits, {"instances": 0, "cores": 0},
                                     {"instances": 1, "cores": 2}, now(), 60, units=(1, 10))
        except Exceeded as over:
            refused.append(over.resource)
        else:
            made.append(count)

    threads = [threading.Thread(target=one_process) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [10] and refused == ["instances"]


@pytest.mark.parametrize("limits,taken,least,most,expected", [
    ({"instances": 10}, {"instances": 0}, 1, 10, 10),
    ({"instances": 10}, {"instances": 7}, 1, 10, 3),
    ({"instances": 10, "cores": 8}, {"instances": 0, "cores": 2}, 1, 10, 3),  # 2 cores each: 6 left
    ({"instances": -1, "cores": -1}, {"instances": 99, "cores": 99}, 1, 5, 5),  # no limits
])
def test_a_multi_create_fits_as_many_as_the_limits_allow(limits, taken, least, most, expected):
    assert units_that_fit(limits, taken, {"instances": 1, "cores": 2}, least, most) == expected


def test_fewer_than_min_count_is_exceeded_naming_the_resource():
    with pytest.raises(Exceeded) as over:
        units_that_fit({"instances": 10, "cores": 8}, {"instances": 0, "cores": 4}, {"instances": 1, "cores": 2},
                       3, 5)
    assert (over.value.resource, over.value.wanted, over.value.used) == ("cores", 6, 4)
