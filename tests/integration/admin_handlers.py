"""Job types for the Admin API integration tests, loaded by the sandbox's
isthmus-admin (and any isthmus-xjob) through ``OS_JOBS__HANDLER_MODULES``, and
run by the test's own worker too. Each behaves the same in any process:

- ``isthmus_test_touch`` (pod_id, network_id): succeeds;
- ``isthmus_test_fail`` (resource_id): fails for good;
- ``isthmus_test_block`` (resource_id = a file path): runs until that file exists.
"""

from __future__ import annotations

import time
from pathlib import Path

from isthmus.jobs import HandlerRegistry, JobContext, PermanentFailure, RetryLater

TOUCH = "isthmus_test_touch"
FAIL = "isthmus_test_fail"
BLOCK = "isthmus_test_block"


def touch(ctx: JobContext) -> None:
    return None


def fail(ctx: JobContext) -> None:
    raise PermanentFailure(f"test failure for {ctx.resource_id}")


def block(ctx: JobContext) -> None:
    release = Path(ctx.resource_id)
    while not release.exists():
        if ctx.should_stop():
            raise RetryLater("worker stopping")
        time.sleep(0.1)


def register_handlers(registry: HandlerRegistry) -> None:
    registry.register(TOUCH, touch, resource_keys=("pod_id", "network_id"))
    registry.register(FAIL, fail)
    registry.register(BLOCK, block)
