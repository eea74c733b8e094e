"""What the gateway answers beyond routing by id, declared in one table.

``declare`` builds every feature from the gateway's ``Core`` with the parts it
uses, then lists what each contributes: collections answered here instead of
forwarded, paths under a routed collection, checks and rewrites around a create,
rewrites of a routed object's reply, and hooks after a write at the master
region. The ``Gateway`` only reads this table; no feature changes it later, so
the order features are built in never changes what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

from isthmus.gateway.call import BeforeCreate, Call, Handler, Hook, RewriteCreate
from isthmus.gateway.core import Core, MasterRegion
from isthmus.gateway.members import ConfirmAbsent, RewriteReply
from isthmus.gateway.summaries import volume_summary
from isthmus.gateway.zones import availability_zones

Key = tuple[str, str]  # (api name, collection or path)


@dataclass(frozen=True)
class Surface:
    master: MasterRegion  # global objects and every unrouted call
    local_handlers: Mapping[Key, Handler] = field(default_factory=dict)  # (api, collection) answered here
    collection_paths: Mapping[Key, Handler] = field(default_factory=dict)  # GET (api, "volumes/summary")
    # Checks before forwarding a create, in order (quota last). One may return an
    # object with ``settle(created)``, called once the region has answered.
    before_create: tuple[BeforeCreate, ...] = ()
    rewrite_create: tuple[RewriteCreate, ...] = ()  # the body for the chosen region
    rewrite_reply: tuple[RewriteReply, ...] = ()  # a routed object's reply before it is rendered
    # A 404 through the caller's token may only mean "not yours": only this
    # (service credentials) may confirm an object is gone.
    confirm_absent: ConfirmAbsent | None = None


def core_handlers(core: Core) -> tuple[dict[Key, Handler], dict[Key, Handler]]:
    """What any gateway answers itself: availability zones (from the registry)
    and Cinder's volume summary (summed over regions)."""
    async def zones(call: Call) -> web.StreamResponse:
        return await availability_zones(call, core.router)

    async def summary(call: Call) -> web.StreamResponse:
        return await volume_summary(call, core.settings, core.router, core.fwd)

    local: dict[Key, Handler] = {("compute", "os-availability-zone"): zones, ("volume", "os-availability-zone"): zones}
    return local, {("volume", "volumes/summary"): summary}


def minimal(core: Core, confirm_absent: ConfirmAbsent | None = None) -> Surface:
    """Routing, merged lists, creates and the master region, with no global objects."""
    local, paths = core_handlers(core)
    return Surface(MasterRegion(core.router, core.fwd, {}), local, paths, confirm_absent=confirm_absent)


def declare(core: Core, conf, engine, session) -> Surface:
    """The whole surface of ``isthmus-gateway`` for a parsed configuration."""
    from isthmus.gateway.aggregates import Aggregates
    from isthmus.gateway.attachments import Attachments
    from isthmus.gateway.globals import GlobalObjects, ImageCopies
    from isthmus.gateway.quota_sets import QuotaViews, UserQuotaJobs
    from isthmus.gateway.quotas import QuotaGuard, Reservations
    from isthmus.gateway.server_groups import ServerGroups
    from isthmus.jobs import JobStore

    store = JobStore(engine)
    quotas = QuotaGuard(core.settings, core.router, core.fwd, core.background, Reservations(engine))
    objects = GlobalObjects(core.router, core.fwd, core.background, store, quotas, session)
    write_hooks: dict[Key, tuple[Hook, ...]] = {
        ("compute", "flavors"): (objects.flavor_written,),
        ("compute", "os-keypairs"): (objects.keypair_written,),
        ("compute", "os-quota-sets"): (objects.compute_quotas_written, UserQuotaJobs(store, core.background).written),
        ("volume", "types"): (objects.volume_type_written,),
        ("volume", "os-quota-sets"): (objects.volume_quotas_written,),
    }
    master = MasterRegion(core.router, core.fwd, write_hooks)
    quota_views = QuotaViews(quotas, master)
    groups = ServerGroups(core.settings, core.router, core.fwd, core.versions, master)
    local, paths = core_handlers(core)
    local |= {
        ("compute", "os-quota-sets"): quota_views.compute_quota_sets,
        ("volume", "os-quota-sets"): quota_views.volume_quota_sets,
        ("compute", "limits"): quota_views.limits,
        ("volume", "limits"): quota_views.limits,  # Cinder's usage summed over regions too
        ("compute", "os-server-groups"): groups.handle,
        ("volume", "attachments"): Attachments(core.settings, core.router, core.fwd).handle,
        ("compute", "os-aggregates"): Aggregates(core.settings, core.router, core.fwd, core.versions).handle,
    }
    before_create: list[BeforeCreate] = [objects.volume_type_in_region]
    if conf.gateway.replicate_images:
        before_create.append(ImageCopies(conf, core.router, core.fwd, core.background, session).copy_images)
    # Instances, cores and RAM (volumes, gigabytes) count across every region
    # against the master's limits, reserved so concurrent creates cannot overshoot.
    # Last of the checks: a reservation lives from forwarding time, not from before
    # a long image copy (its lifetime is the request timeout).
    before_create.append(quotas.admit)
    return Surface(master, local, paths, tuple(before_create), rewrite_create=(groups.rewrite_hint,),
                   rewrite_reply=(groups.server_groups_of_server,), confirm_absent=objects.confirm_absent)
