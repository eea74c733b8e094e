"""Where a per-region OpenStack service of the sandbox (Nova, Cinder, Octavia)
keeps its files, and what it connects to: its region's broker vhost, its own
database and its service user."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from isthmus.configs.ini import ServiceUser
from isthmus.sandbox import database, rabbitmq
from isthmus.sandbox.layout import PASSWORD, Layout


@dataclass(frozen=True)
class RegionalService:
    layout: Layout
    name: str  # the service's user, config file and directory names: "nova", "cinder", ...
    region: str

    @property
    def etc(self) -> Path:
        return self.layout.etc / f"{self.name}-{self.region}"

    @property
    def conf(self) -> Path:
        return self.etc / f"{self.name}.conf"

    @property
    def state(self) -> Path:
        return self.layout.data / f"{self.name}-{self.region}"

    def database_name(self, schema: str | None = None) -> str:
        """The region's database of this service, or of another of its schemas (``nova_api``)."""
        return f"{schema or self.name}_{self.region.lower()}"

    def database_url(self, schema: str | None = None) -> str:
        return database.url(self.layout, self.database_name(schema))

    def transport_url(self) -> str:
        return rabbitmq.transport_url(self.layout, self.region)

    def service_user(self) -> ServiceUser:
        return ServiceUser(self.layout.auth_url, self.name, PASSWORD, self.region)
