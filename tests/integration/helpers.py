"""Helpers of the integration tests (the fixtures are in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import openstack.exceptions as os_exc

from isthmus.network import SHADOW_OWNER
from isthmus.polling import poll
from isthmus.sandbox.layout import Layout

CENTRAL = "CentralRegion"


def sandbox_layout(state_dir: Path) -> Layout:
    """The layout of a sandbox that is up (its state directory has one)."""
    layout = Layout.load(state_dir)
    assert layout is not None, f"no sandbox in {state_dir}"
    return layout


def service_connection(sandbox, region: str):
    """A connection as Isthmus' own service user (``isthmus``, project ``service``):
    who the job worker and the local plugins act as."""
    import openstack

    from isthmus.sandbox.layout import PASSWORD

    return openstack.connect(auth_url=sandbox_layout(sandbox.state_dir).auth_url, username="isthmus",
                             password=PASSWORD, project_name="service", user_domain_name="Default",
                             project_domain_name="Default", region_name=region)


def eventually(check, timeout: float = 120, interval: float = 1.0, what="condition"):
    """Poll until ``check()`` returns a truthy value (jobs run asynchronously).
    ``what`` may be a callable: it then describes the state at the timeout."""
    try:
        return poll(check, timeout, what, interval)
    except TimeoutError as err:
        raise AssertionError(f"timed out waiting for {err}") from None


def merged_equals_direct(direct, merged, minimum: int = 0, what: str = "merged == direct") -> int:
    """Wait until ``merged()`` (a total through Isthmus) equals ``direct()`` (the regions'
    own total) at a moment the direct total held still around the merged read: other
    tests create and delete in the same project at the same time. Returns the total."""
    seen: list = []

    def quiet_and_equal() -> bool:
        before = direct()
        total = merged()
        after = direct()
        seen[:] = [before, total, after]
        return before == after == total and total >= minimum

    eventually(quiet_and_equal, timeout=180, interval=2, what=lambda: f"{what} (direct, merged, direct: {seen})")
    return seen[1]


def delete_user_ports(conn, network_id: str) -> None:
    """Delete the ports a test made on a network: not Neutron's own (``network:*``),
    and not Isthmus' shadows, which the worker removes once their ports are gone
    (a user may not delete a shadow: 403 by the local plugin's policy)."""
    for port in conn.network.ports(network_id=network_id):
        owner = port.device_owner or ""
        if not owner.startswith("network:") and owner != SHADOW_OWNER:
            conn.network.delete_port(port, ignore_missing=True)


def delete_network(conn, network_id: str) -> bool:
    try:
        conn.network.delete_network(network_id, ignore_missing=True)
        return True
    except os_exc.ConflictException:
        return False  # a server's port is still being deleted


# -- networking: boots and lookups the networking tests share --------------------

def boot(conn, name: str, network_id: str | None = None, port_id: str | None = None):
    image = conn.image.find_image("tiny", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
    nic = {"port": port_id} if port_id else {"uuid": network_id}
    return conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id, networks=[nic])


def boot_in_every_region_on_group_ports(sandbox, central, net, group) -> dict:
    """One server per region, each on its own central port in ``group``: region -> (server, port)."""
    servers = {}
    for region in sandbox.regions:
        port = central.network.create_port(network_id=net.id, security_group_ids=[group.id], name=net.name)
        conn = sandbox.connect(region)
        servers[region] = (conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240), port)
    return servers


def central_port(admin, port_id):
    return admin[CENTRAL].network.get_port(port_id)


def port_or_none(conn, port_id):
    try:
        return conn.network.get_port(port_id)
    except os_exc.NotFoundException:
        return None


def network_or_none(conn, network_id):
    try:
        return conn.network.get_network(network_id)
    except os_exc.NotFoundException:
        return None


def delete_security_group(conn, sg_id):
    try:
        conn.network.delete_security_group(sg_id, ignore_missing=True)
        return True
    except os_exc.ConflictException:
        # Neutron's 409 names no port: say which hold the group, for a report that times out.
        holders = [(p.id, p.device_owner, p.binding_host_id, p.status)
                   for p in conn.network.ports(security_groups=sg_id)]
        print(f"security group {sg_id} in use by {holders}")
        return False


def sandbox_cli(sandbox, *args):
    from tests.sandboxes import isthmus

    return isthmus(*args[:2], "--state-dir", str(sandbox.state_dir), *args[2:])


def enqueue_job(sandbox, job_type: str, resource_id: str) -> None:
    """As ``openstack multiregion job create`` does."""
    from isthmus.db import make_engine
    from isthmus.jobs import JobStore

    JobStore(make_engine(sandbox_layout(sandbox.state_dir).isthmus_db_url)).enqueue(job_type, resource_id)


def security_group_or_none(conn, sg_id):
    try:
        return conn.network.get_security_group(sg_id)
    except os_exc.NotFoundException:
        return None


def job_of(sandbox, job_type: str, resource_id: str):
    from isthmus.db import make_engine
    from isthmus.jobs import JobStore

    return JobStore(make_engine(sandbox_layout(sandbox.state_dir).isthmus_db_url)).find(job_type, resource_id)


def run_again(sandbox, job_type: str, resource_id: str):
    """Enqueue the job; a function that answers its outcome once a run that
    started after this enqueue has finished (an older result does not count)."""
    from datetime import UTC, datetime

    since = datetime.now(UTC)
    enqueue_job(sandbox, job_type, resource_id)

    def finished():
        job = job_of(sandbox, job_type, resource_id)
        done = job is not None and job.status in ("SUCCESS", "FAIL")
        return job if done and job.started_at and job.started_at >= since else None

    return finished


def bound_in(admin, port_id: str, region: str) -> bool:
    from openstack import exceptions as os_exc

    from isthmus.network import bound_region

    try:
        port = admin[CENTRAL].network.get_port(port_id)
    except os_exc.SDKException:
        # Polled right after central's neutron-server restarted: its first answers
        # can be a 404 or 503 for an existing port (seen in CI); the next poll asks again.
        return False
    return bound_region({"binding:host_id": port.binding_host_id, "binding:profile": port.binding_profile}) == region
