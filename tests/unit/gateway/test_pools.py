"""The image-copy pool refuses at once when full."""

from __future__ import annotations

import asyncio
import threading

import pytest

from isthmus.gateway.pools import AdmissionPool, Busy


def test_a_full_admission_pool_refuses_at_once_and_admits_again_when_a_slot_frees():
    async def run():
        pool = AdmissionPool(workers=1, queue=1, name="test-images")
        release = threading.Event()
        first = asyncio.ensure_future(pool.run(release.wait, 10))
        second = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(0.05)
        assert pool.in_flight == 2
        with pytest.raises(Busy):
            await pool.run(lambda: "third")  # no wait: the caller answers 503 at once
        release.set()
        assert await first and await second
        assert await pool.run(lambda: "again") == "again"
        pool.shutdown()
    asyncio.run(run())


def test_work_whose_caller_stopped_waiting_still_counts_until_it_ends():
    async def run():
        pool = AdmissionPool(workers=1, queue=0, name="test-images")
        release = threading.Event()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.run(release.wait, 10), 0.05)
        with pytest.raises(Busy):  # the copy still runs: no second one beside it
            await pool.run(lambda: "second")
        release.set()
        await asyncio.sleep(0.1)
        assert pool.in_flight == 0
        assert await pool.run(lambda: "second") == "second"
        pool.shutdown()
    asyncio.run(run())
