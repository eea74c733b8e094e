"""The one question the network reconcilers ask Nova: is this server gone?

Nova's answer is proof a port's device was deleted (docs/networking.md, "Deleted
only on proof"); anything short of Nova's own "not found" is no answer.
"""

from __future__ import annotations

from isthmus.clients.service import ServiceClient, Unavailable, member_path


class NovaClient(ServiceClient):
    service = "Nova"

    def server_gone(self, server_id: str) -> bool:
        """True only on Nova's 404 naming the server (``itemNotFound``); False
        while Nova has it (a soft-deleted server too: it can be restored).
        :class:`Unavailable` for anything else (down, 5xx, a 404 of the URL)."""
        path = member_path("servers", server_id)
        if path is None:
            raise ValueError(f"not a server id: {server_id!r}")
        resp = self._send("GET", path)
        if resp.status_code == 404:
            try:
                body = resp.json()
            except ValueError:
                body = None
            if isinstance(body, dict) and "itemNotFound" in body:
                return True
            raise Unavailable(f"{self.region} Nova: 404 without itemNotFound for server {server_id}")
        if resp.status_code == 200:
            return False
        raise Unavailable(f"{self.region} Nova answered {resp.status_code} for server {server_id}: "
                          f"{resp.text[:300]}")
