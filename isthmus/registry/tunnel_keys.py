"""OVN tunnel keys, allocated once for every OVN region (docs/ovn.md).

Every OVN deployment that carries a stretched logical switch must give it the
same datapath key, and each of its ports one key, unique on that switch across
all of them (geneve carries both). Central allocates them here:

* a network's key from OVN's range for cross-deployment datapaths
  (16711681-16777215: northd never hands those out itself);
* a port's key from 1-32767 (OVN's logical port keys), unique per network.

Allocation is idempotent (the same resource keeps its key) and race-safe (the
unique constraint decides; a loser reads the winner's key). A key is freed only
when its resource's delete is proven and every region dropped its use.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from isthmus.db import read_tx, retry_transient, write_tx
from isthmus.registry import schema

NETWORK_KEYS = range(16711681, 16777216)
PORT_KEYS = range(1, 32768)
NETWORK_SCOPE = ""


class KeysExhausted(RuntimeError):
    """Every key of a range is taken."""


def lowest_free(used: Iterable[int], keys: range) -> int:
    taken = set(used)
    for key in keys:
        if key not in taken:
            return key
    raise KeysExhausted(f"all {len(keys)} tunnel keys {keys.start}-{keys.stop - 1} are taken")


class TunnelKeys:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def network_key(self, network_id: str) -> int:
        return self._allocate(NETWORK_SCOPE, network_id, NETWORK_KEYS)

    def port_key(self, network_id: str, port_id: str) -> int:
        return self._allocate(network_id, port_id, PORT_KEYS)

    def port_keys(self, network_id: str) -> dict[str, int]:
        """Every allocated key of the network's ports, by port id."""
        t = schema.tunnel_keys
        with read_tx(self.engine) as conn:
            rows = conn.execute(sa.select(t.c.resource_id, t.c.tunnel_key).where(t.c.scope == network_id)).all()
        return {str(rid): int(key) for rid, key in rows}

    def release_port(self, network_id: str, port_id: str) -> None:
        self._delete(sa.and_(schema.tunnel_keys.c.scope == network_id,
                             schema.tunnel_keys.c.resource_id == port_id))

    def release_network(self, network_id: str) -> None:
        """The network's key and its ports' keys."""
        t = schema.tunnel_keys
        self._delete(sa.or_(t.c.scope == network_id,
                            sa.and_(t.c.scope == NETWORK_SCOPE, t.c.resource_id == network_id)))

    def _delete(self, where: sa.ColumnElement[bool]) -> None:
        def delete() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(schema.tunnel_keys.delete().where(where))

        retry_transient(delete)

    def _allocate(self, scope: str, resource_id: str, keys: range) -> int:
        t = schema.tunnel_keys
        for _ in range(20):  # each lost race names a key another allocation took
            with read_tx(self.engine) as conn:
                rows = conn.execute(sa.select(t.c.resource_id, t.c.tunnel_key).where(t.c.scope == scope)).all()
            mine = next((int(key) for rid, key in rows if rid == resource_id), None)
            if mine is not None:
                return mine
            key = lowest_free((key for _, key in rows), keys)
            try:
                with write_tx(self.engine) as conn:
                    conn.execute(t.insert().values(scope=scope, resource_id=resource_id, tunnel_key=key,
                                                   created_at=datetime.now(UTC).replace(tzinfo=None)))
                return key
            except IntegrityError:
                continue  # the key or the resource was taken concurrently: read again
        raise RuntimeError(f"tunnel key of {resource_id}: no allocation after 20 races")
