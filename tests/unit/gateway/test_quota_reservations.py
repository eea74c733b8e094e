"""Quota reservations: concurrent creates in any gateway process never overshoot (issue 9 §5)."""

import threading
from contextlib import ExitStack
from datetime import datetime, timedelta

import pytest

from isthmus.db import make_engine
from isthmus.gateway import schema
from isthmus.gateway.quotas import Exceeded, Reservations
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
    rid = store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, before, 60)
    store.settle(rid, created=True)
    # A reading that started before the create finished may not show it: counted.
    with pytest.raises(Exceeded) as over:
        store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 2}, before, 60)
    assert over.value.resource == "instances" and over.value.used == 2
    # A reading that started after it finished includes it in the region's usage: not counted twice.
    store.reserve("compute", "p", LIMITS, {"instances": 2}, {"instances": 1}, now() + timedelta(seconds=1), 60)


def test_a_create_that_made_nothing_gives_its_reservation_back(db_url):
    store = Reservations(make_engine(db_url))
    rid = store.reserve("compute", "p", LIMITS, {"instances": 0}, {"instances": 3}, now(), 60)
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
