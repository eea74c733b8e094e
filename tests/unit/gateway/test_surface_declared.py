"""The gateway's surface is one table built from the configuration (surface.declare)."""

from __future__ import annotations

import pytest

from isthmus.db import make_engine
from isthmus.gateway import config, surface
from isthmus.gateway.call import Settings
from isthmus.gateway.catalog import Catalog
from isthmus.gateway.core import Core
from isthmus.gateway.proxy import Upstream
from isthmus.gateway.routing import Router
from isthmus.registry import Registry


@pytest.fixture
def core(tmp_path):
    registry = Registry(make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}"))
    catalog = Catalog(lambda _refresh: ({}, None), "public", {"CentralRegion"}, ttl=300)
    return Core.build(Settings(), Router(registry, "CentralRegion", "RegionOne"), catalog, Upstream())


def declared(core, tmp_path, **gateway_options) -> surface.Surface:
    conf = config.load([], default_files=[])
    for name, value in gateway_options.items():
        conf.set_override(name, value, "gateway")
    return surface.declare(core, conf, make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}"), session=None)


def names(hooks) -> list[str]:
    return [hook.__name__ for hook in hooks]


def test_the_quota_check_runs_last_before_a_create(core, tmp_path):
    # A reservation lives from forwarding time: an image copy must not eat into it.
    assert names(declared(core, tmp_path, replicate_images=True).before_create) == [
        "volume_type_in_region", "copy_images", "admit"]
    assert names(declared(core, tmp_path, replicate_images=False).before_create) == [
        "volume_type_in_region", "admit"]


def test_every_global_object_write_at_the_master_has_its_hooks(core, tmp_path):
    hooks = declared(core, tmp_path).master.write_hooks
    assert {key: names(found) for key, found in hooks.items()} == {
        ("compute", "flavors"): ["flavor_written"],
        ("compute", "os-keypairs"): ["keypair_written"],
        # the project's limits first (they reset the quota cache), then a user's limits
        ("compute", "os-quota-sets"): ["compute_quotas_written", "written"],
        ("volume", "types"): ["volume_type_written"],
        ("volume", "os-quota-sets"): ["volume_quotas_written"],
    }


def test_the_collections_the_gateway_answers_itself(core, tmp_path):
    full = declared(core, tmp_path)
    assert set(full.local_handlers) == {
        ("compute", "os-availability-zone"), ("volume", "os-availability-zone"),
        ("compute", "os-quota-sets"), ("volume", "os-quota-sets"), ("compute", "limits"), ("volume", "limits"),
        ("compute", "os-server-groups"), ("volume", "attachments"), ("compute", "os-aggregates"),
    }
    assert set(full.collection_paths) == {("volume", "volumes/summary")}
    assert full.confirm_absent is not None  # a stranger's 404 never removes a routing
    bare = surface.minimal(core)
    assert set(bare.local_handlers) < set(full.local_handlers) and not bare.master.write_hooks
