"""Every database server wait is bounded: the drivers' own
defaults wait for ever on a black-holed server."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from isthmus.db.engine import CONNECT_TIMEOUT, READ_TIMEOUT, make_engine, timeout_args


@pytest.mark.parametrize("url", ["mysql+pymysql://u:p@db.example/isthmus", "mariadb+pymysql://u:p@db/isthmus"])
def test_pymysql_gets_connect_read_and_write_timeouts(url):
    assert timeout_args(sa.engine.make_url(url)) == {
        "connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT, "write_timeout": READ_TIMEOUT}


def test_postgresql_gets_a_connect_timeout_keepalives_and_a_tcp_user_timeout():
    args = timeout_args(sa.engine.make_url("postgresql+psycopg2://u:p@db/isthmus"))
    assert args["connect_timeout"] == CONNECT_TIMEOUT and args["keepalives"] == 1
    assert args["tcp_user_timeout"] == READ_TIMEOUT * 1000


def test_an_operators_own_value_in_the_url_wins():
    args = timeout_args(sa.engine.make_url("mysql+pymysql://u:p@db/isthmus?read_timeout=5"))
    assert "read_timeout" not in args and args["connect_timeout"] == CONNECT_TIMEOUT


def test_the_engine_passes_them_to_the_driver():
    engine = make_engine("mysql+pymysql://u:p@db.example/isthmus")
    captured: dict = {}

    @sa.event.listens_for(engine, "do_connect")
    def capture(dialect, record, cargs, cparams):
        captured.update(cparams)
        raise RuntimeError("captured, not connecting")

    with pytest.raises(RuntimeError, match="captured"):
        engine.connect()
    assert (captured["host"], captured["read_timeout"], captured["connect_timeout"]) == \
        ("db.example", READ_TIMEOUT, CONNECT_TIMEOUT)


def test_sqlite_needs_none():
    assert timeout_args(sa.engine.make_url("sqlite:///x.db")) == {}
