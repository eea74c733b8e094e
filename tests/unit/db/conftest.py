"""An empty database per test on SQLite, PostgreSQL and MariaDB (migrations
must start from nothing, so the job tests' shared database does not fit)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.dbservers import BACKENDS, Unreachable, empty_database


@pytest.fixture(params=BACKENDS)
def empty_db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    with ExitStack() as stack:
        try:
            url = stack.enter_context(empty_database(request.param, tmp_path, "isthmus_mig"))
        except Unreachable as exc:
            pytest.skip(f"{request.param} server unreachable: {exc}")
        yield url
