"""The steps that bring a sandbox up, and the ports it will listen on."""

from __future__ import annotations

import functools

from isthmus.sandbox import (
    admin_api,
    cinder,
    database,
    gateway,
    glance,
    keystone,
    neutron,
    nova,
    octavia,
    ovn,
    placement,
    rabbitmq,
    registry,
    runtime,
    xjob,
)
from isthmus.sandbox.dag import Step
from isthmus.sandbox.dataplane import host as dataplane
from isthmus.sandbox.layout import CENTRAL_REGION, STOCK_NEUTRON, Layout
from isthmus.sandbox.schema_cache import SchemaCache


def planned_ports(layout: Layout) -> list[tuple[str, int]]:
    ports = [("keystone", layout.keystone_port), (f"neutron-{CENTRAL_REGION}", layout.central_neutron_port)]
    ports.append((admin_api.NAME, layout.admin_api_port))
    if not layout.plain:
        ports += [(name, layout.xjob_metrics_port_of(i)) for i, name in enumerate(layout.xjob_names, start=1)]
    if layout.stock_neutron:
        ports.append((f"neutron-{STOCK_NEUTRON}", layout.stock_neutron_port))
    if layout.uses_mariadb and not layout.db_url:
        ports.append(("mariadb", layout.mariadb_port))
    for region in layout.regions:
        ports.append((f"neutron-{region}", layout.neutron_port(region)))
        if layout.compute:
            for service in ("nova", "placement", "glance", *(("cinder",) if layout.volume else ()),
                            *(("octavia",) if layout.octavia else ())):
                name = {"nova": "nova-api", "octavia": "octavia-api"}.get(service, service)
                ports.append((f"{name}-{region}", layout.region_port(region, service)))
    if layout.compute:
        ports.append(("isthmus-gateway", layout.gateway_port))
    return ports


def _seed_default_rules(layout: Layout, region: str) -> None:
    neutron.seed_default_rules(keystone.admin_connection(layout, region))


def _serve(start):
    """A step that starts an HTTP service and waits until it answers."""
    def step() -> None:
        runtime.wait_http(start())
    return step


def steps(layout: Layout, cache: SchemaCache | None = None) -> list[Step]:
    """``cache``: where migrated schemas are loaded from (off: None)."""
    cache = cache or SchemaCache(None)
    registered: dict[str, bool] = {}  # keystone-setup loaded the catalogue from the cache
    plan = [
        Step("keystone-setup", lambda: registered.update(catalog=keystone.prepare(layout, cache)),
             what="schema, keys, bootstrap"),
        Step("keystone", _serve(lambda: keystone.start(layout)), ("keystone-setup",), "starting, waiting for health"),
        Step("catalog", lambda: keystone.register(layout, cache, loaded=registered.get("catalog", False)),
             ("keystone",), "regions, users, services, endpoints"),
        Step("isthmus-db", lambda: registry.prepare(layout, cache), (), "isthmus db upgrade, pods"),
        # After "catalog": the isthmus service user it validates tokens with exists.
        Step(admin_api.NAME, _serve(lambda: admin_api.start(layout)), ("isthmus-db", "catalog"), "starting"),
    ]
    infra: tuple[str, ...] = ()
    if layout.uses_mariadb:
        def mariadb() -> None:
            database.start_private(layout)
            database.create_databases(layout)
        plan.append(Step("mariadb", mariadb, what="private server" if not layout.db_url else "databases on --db-url"))
    if layout.compute:
        plan.append(Step("rabbitmq", lambda: rabbitmq.create_vhosts(layout), what="one vhost per region"))
        infra = ("rabbitmq",)
    for region in layout.ovn_regions:
        plan += [
            Step(f"ovn-{region}", functools.partial(_start_ovn, layout, region), (),
                 "OVN Northbound, Southbound, northd"),
            Step(f"ovn-chassis-{region}", functools.partial(ovn.start_chassis, layout, region),
                 (f"ovn-{region}", "dataplane-hosts"), "Open vSwitch (userspace) and ovn-controller"),
        ]
    for region in (CENTRAL_REGION, *layout.regions):
        # Central's plugin opens the Isthmus DB at start: after its schema exists.
        after: tuple[str, ...] = ("isthmus-db",) if region == CENTRAL_REGION else ()
        after += (f"ovn-{region}",) if layout.is_ovn(region) else ()
        plan += [
            Step(f"neutron-setup-{region}", functools.partial(neutron.prepare, layout, region, cache),
                 ("mariadb",) if layout.neutron_on_mariadb(region) else (), what="schema"),
            Step(f"neutron-{region}", _serve(lambda r=region: neutron.start(layout, r)),
                 (f"neutron-setup-{region}", *infra, *after), "starting, waiting for health"),
            Step(f"neutron-defaults-{region}",
                 functools.partial(_seed_default_rules, layout, region),
                 (f"neutron-{region}", "catalog"), "default security-group rules"),
        ]
    if layout.stock_neutron:
        plan += [
            Step(f"neutron-setup-{STOCK_NEUTRON}", functools.partial(neutron.prepare, layout, STOCK_NEUTRON, cache),
                 what="schema"),
            Step(f"neutron-{STOCK_NEUTRON}", _serve(lambda: neutron.start(layout, STOCK_NEUTRON)),
                 (f"neutron-setup-{STOCK_NEUTRON}",), "stock ML2, in no catalogue (the fuzz tests' baseline)"),
            Step(f"neutron-defaults-{STOCK_NEUTRON}",
                 lambda: neutron.seed_default_rules(keystone.admin_connection(layout, STOCK_NEUTRON)),
                 (f"neutron-{STOCK_NEUTRON}", "catalog"), "default security-group rules"),
        ]
    if not layout.plain:
        plan += [Step(name, functools.partial(xjob.start, layout, i), ("isthmus-db", "catalog"), "job worker")
                 for i, name in enumerate(layout.xjob_names, start=1)]
    if layout.compute:
        for region in layout.regions:
            plan += _compute_steps(layout, region, cache)
            if layout.octavia:
                plan += _octavia_steps(layout, region, cache)
        plan.append(Step("isthmus-gateway", _serve(lambda: gateway.start(layout)), ("isthmus-db", "catalog"),
                         "Nova/Cinder API gateway"))
    if layout.dataplane:
        plan.append(Step("dataplane-hosts", lambda: dataplane.create_hosts(layout), (),
                         "underlay and one host namespace per region"))
        for region in layout.regions:
            chassis = (f"ovn-chassis-{region}",) if layout.is_ovn(region) else ()
            plan.append(Step(dataplane.agent_name(region), functools.partial(dataplane.start_agent, layout, region),
                             ("dataplane-hosts", f"neutron-{region}", "catalog", *chassis),
                             "agent wiring the host from Neutron"))
    return plan


def _start_ovn(layout: Layout, region: str) -> None:
    ovn.prepare(layout, region)
    ovn.start_databases(layout, region)


def _compute_steps(layout: Layout, region: str, cache: SchemaCache) -> list[Step]:
    r = region

    def compute() -> None:
        record = nova.start_compute(layout, r)
        nova.wait_compute_ready(layout, r, keystone.admin_connection(layout, r), record)

    def content() -> None:
        conn = keystone.admin_connection(layout, r)
        glance.ensure_tiny_image(conn)
        nova.ensure_flavor(conn)

    cinder_records: list = []

    def volumes() -> None:
        cinder.wait_volume_service(layout, r, keystone.admin_connection(layout, r), cinder_records)

    steps = [
        Step(f"placement-setup-{r}", lambda: placement.prepare(layout, r, cache), ("mariadb",), "db sync"),
        Step(f"placement-{r}", _serve(lambda: placement.start(layout, r)), (f"placement-setup-{r}",), "starting"),
        # Schemas need only the database server; what talks over RPC waits for the vhosts.
        Step(f"nova-setup-{r}", lambda: nova.prepare(layout, r, cache), ("mariadb",), "api db, cells, schema"),
        Step(f"nova-api-{r}", _serve(lambda: nova.start_api(layout, r)), (f"nova-setup-{r}", "rabbitmq"), "starting"),
        Step(f"glance-setup-{r}", lambda: glance.prepare(layout, r, cache), (), "schema"),
        Step(f"glance-{r}", _serve(lambda: glance.start(layout, r)), (f"glance-setup-{r}",), "starting"),
        # Both build their Placement client as they start (catalog, nova user); a 401 there is fatal.
        Step(f"nova-control-{r}", lambda: nova.wait_control_ready(layout, r, nova.start_control(layout, r)),
             (f"nova-setup-{r}", f"placement-{r}", "catalog", "rabbitmq"), "conductor, scheduler, until they consume"),
        # On OVN, ML2 binds a port only to a host whose chassis is registered.
        Step(f"nova-compute-{r}", compute, (f"nova-control-{r}", f"nova-api-{r}", f"neutron-{r}",
                                            *((f"ovn-chassis-{r}",) if layout.is_ovn(r) else ())),
             "starting, waiting for the host to report"),
        Step(f"content-{r}", content, (f"glance-{r}", f"nova-api-{r}", "catalog"),
             f"image {glance.TINY_IMAGE}, flavor {nova.FLAVOR}"),
    ]
    if not layout.volume:
        return steps
    return steps + [
        Step(f"cinder-setup-{r}", lambda: cinder.prepare(layout, r, cache), ("mariadb",), "db sync"),
        Step(f"cinder-api-{r}", _serve(lambda: cinder.start_api(layout, r)), (f"cinder-setup-{r}", "rabbitmq"),
             "starting"),
        # Scheduler and volume service start with their database and broker; whether
        # the backend reports up is asked through the API (catalog).
        Step(f"cinder-control-{r}", lambda: cinder_records.extend(cinder.start_control(layout, r)),
             (f"cinder-setup-{r}", "rabbitmq"), "scheduler, volume (no-disk backend)"),
        Step(f"cinder-volume-{r}", volumes, (f"cinder-control-{r}", f"cinder-api-{r}", "catalog"),
             "waiting for the backend to report"),
    ]


def _octavia_steps(layout: Layout, region: str, cache: SchemaCache) -> list[Step]:
    r = region
    return [
        Step(f"octavia-setup-{r}", lambda: octavia.prepare(layout, r, cache), ("mariadb",), "db upgrade, CA"),
        # Its health check is unauthenticated: it can start before its service user exists.
        Step(f"octavia-api-{r}", _serve(lambda: octavia.start_api(layout, r)), (f"octavia-setup-{r}", "rabbitmq"),
             "starting"),
        Step(f"octavia-worker-{r}", lambda: octavia.start_worker(layout, r), (f"octavia-setup-{r}", "rabbitmq"),
             "amphora flows, no-op drivers"),
    ]


def starter(layout: Layout, name: str):
    """How to start one service of a running sandbox again (``sandbox restart``);
    returns a callable that starts it and waits until it answers."""
    starters = {
        "keystone": _serve(lambda: keystone.start(layout)),
        admin_api.NAME: _serve(lambda: admin_api.start(layout)),
        **{name: functools.partial(xjob.start, layout, i) for i, name in enumerate(layout.xjob_names, start=1)},
    }
    if layout.uses_mariadb and not layout.db_url:  # the sandbox's own (an operator's --db-url is not ours to start)
        starters["mariadb"] = lambda: database.start_private(layout)
    if layout.compute:
        starters["isthmus-gateway"] = _serve(lambda: gateway.start(layout))
    stock = (STOCK_NEUTRON,) if layout.stock_neutron else ()
    for region in (CENTRAL_REGION, *layout.regions, *stock):
        starters[f"neutron-{region}"] = _serve(lambda r=region: neutron.start(layout, r))
    if layout.compute:
        for region in layout.regions:
            starters[f"nova-api-{region}"] = _serve(lambda r=region: nova.start_api(layout, r))
            starters[f"placement-{region}"] = _serve(lambda r=region: placement.start(layout, r))
            starters[f"glance-{region}"] = _serve(lambda r=region: glance.start(layout, r))
            starters[f"nova-compute-{region}"] = lambda r=region: nova.start_compute(layout, r)
            if layout.octavia:
                starters[f"octavia-api-{region}"] = _serve(lambda r=region: octavia.start_api(layout, r))
                starters[f"octavia-worker-{region}"] = lambda r=region: octavia.start_worker(layout, r)
    if layout.dataplane:
        for region in layout.regions:
            starters[dataplane.agent_name(region)] = lambda r=region: dataplane.start_agent(layout, r)
    starters.update(ovn.starters(layout))
    if name not in starters:
        raise ValueError(f"cannot restart {name!r}; restartable: {', '.join(sorted(starters))}")
    return starters[name]
