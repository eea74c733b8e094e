"""Run one reconciler step in every region side by side.

Each region is its own Neutron: a slow or down one delays no other. A region
that cannot be reached makes the job retry later (never read as "gone"); a
region that refuses the request fails the job with its message, except a
policy refusal (403), which is retried: a neutron-server that has just started
loads its plugins and their policy rules on its first requests, and answered
Isthmus' service user 403 for a write it allows a moment later (seen in a fault
campaign, right after a regional neutron-server was killed and restarted). A
service user the region really refuses still fails the job, after the engine's
``max_attempts``, with the region's message.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from isthmus.clients import Rejected, Unavailable
from isthmus.clients.ovsdb import OvsdbUnavailable
from isthmus.jobs import PermanentFailure, RetryLater

LOG = logging.getLogger(__name__)
MAX_PARALLEL_REGIONS = 8
FORBIDDEN = 403


class RefusedByPolicy(Exception):
    """A region answered 403: retried as a failure (backoff, ``max_attempts``)."""


def in_every_region(regions: Sequence[str], step: Callable[[str], None], label: str) -> None:
    """``step(region)`` for each region in parallel; RetryLater naming the
    unreachable ones, PermanentFailure on a refusal."""
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL_REGIONS, len(regions))),
                            thread_name_prefix=label[:24]) as pool:
        # Each in a copy of this context: the job's call guard (stop when the
        # lease is lost or the deadline passed) must reach the region threads.
        outcomes = {region: pool.submit(contextvars.copy_context().run, step, region) for region in regions}
    unreachable, refused = [], []
    for region, outcome in outcomes.items():
        try:
            outcome.result()
        except (Unavailable, OvsdbUnavailable) as err:  # its Neutron or its OVN databases
            LOG.warning("%s: %s; will retry", label, err)
            unreachable.append(region)
        except Rejected as err:
            if err.status != FORBIDDEN:
                # The job fails for good: the log keeps where the refusal came from.
                LOG.warning("%s: %s refused it; the job fails", label, region, exc_info=err)
                raise PermanentFailure(f"{region}: {err}") from err
            LOG.warning("%s: %s; will retry", label, err)
            refused.append(f"{region} ({err})")
    said = [f"regions unreachable: {', '.join(unreachable)}"] if unreachable else []
    if refused:
        # A failure, not RetryLater (which has no attempt limit): backed off and
        # bounded by max_attempts, so a real refusal ends in FAIL with its message.
        raise RefusedByPolicy("; ".join([*said, f"refused by policy: {', '.join(refused)}"]))
    if unreachable:
        raise RetryLater(said[0])
