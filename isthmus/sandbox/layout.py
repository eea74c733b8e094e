"""Where a sandbox keeps its files and which ports it uses.

Every port derives from ``base_port`` so two sandboxes with different base ports
never collide. The layout is saved as ``sandbox.json`` in the state directory, so
``status``/``down``/``logs`` work without repeating the options given to ``up``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from isthmus.configs.services import TLSFiles

CENTRAL_REGION = "CentralRegion"
# A stock ML2 neutron-server next to central (``--stock-neutron``): not in any
# catalogue; the differential fuzz tests' baseline (docs/fuzzing.md).
STOCK_NEUTRON = "Stock"
DEFAULT_REGIONS = ("RegionOne", "RegionTwo")
DEFAULT_BASE_PORT = 21000
DEFAULT_STATE_DIR = ".sandbox"
# Sandbox-only credentials: everything listens on 127.0.0.1.
PASSWORD = "isthmus"
STATE_FILE = "sandbox.json"

# Port offsets. Central services use base+0..9, region i uses base+10*(i+1)+0..9.
KEYSTONE_OFFSET = 0
CENTRAL_NEUTRON_OFFSET = 1
ADMIN_API_OFFSET = 2  # Isthmus Admin API (multiregion)
GATEWAY_OFFSET = 3  # isthmus-gateway: CentralRegion's compute (and volume) endpoint
STOCK_NEUTRON_OFFSET = 4  # --stock-neutron
XJOB_METRICS_OFFSET = 5  # isthmus-xjob's Prometheus /metrics ([metrics] port); the Nth worker: 5+N-1
MAX_XJOB_WORKERS = 4  # their metrics ports take offsets 5..8
MARIADB_OFFSET = 9
REGION_OFFSETS = {"neutron": 0, "nova": 1, "placement": 2, "glance": 3, "cinder": 4, "octavia": 5,
                  "ovn_nb": 6, "ovn_sb": 7}
MAX_REGIONS = 9

_REGION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def availability_zone(index: int) -> str:
    """RegionOne is az1, RegionTwo az2, ... (by position in --regions)."""
    return f"az{index + 1}"


def parse_regions(text: str) -> tuple[str, ...]:
    regions = tuple(r.strip() for r in text.split(",") if r.strip())
    if not regions:
        raise ValueError("--regions: give at least one region name")
    if len(regions) > MAX_REGIONS:
        raise ValueError(f"--regions: at most {MAX_REGIONS} regions, got {len(regions)}")
    for name in regions:
        if not _REGION_NAME.match(name):
            raise ValueError(f"--regions: {name!r} is not a valid region name")
        if name == CENTRAL_REGION:
            raise ValueError(f"--regions: {CENTRAL_REGION} is the central region, not a compute region")
    if len(set(regions)) != len(regions):
        raise ValueError("--regions: region names repeat")
    return regions


def xjob_name(worker: int) -> str:
    return "isthmus-xjob" if worker == 1 else f"isthmus-xjob-{worker}"


@dataclasses.dataclass(frozen=True)
class Layout:
    state_dir: Path
    base_port: int = DEFAULT_BASE_PORT
    regions: tuple[str, ...] = DEFAULT_REGIONS
    compute: bool = True
    # External database server for Nova/Placement; None = a private MariaDB.
    db_url: str | None = None
    # Stock ML2 everywhere, no Isthmus plugins or xjob (the benchmarks' baseline).
    plain: bool = False
    # Neutron's pagination_max_limit in every region (0: unlimited, Neutron's
    # default). The tests run with a small one: every list must page to the end.
    neutron_page_limit: int = 0
    # Real network endpoints: a namespace per compute host and per server, wired
    # by a per-region agent from Neutron's API (isthmus/sandbox/dataplane/).
    dataplane: bool = False
    # One more neutron-server, stock ML2, in no catalogue (docs/fuzzing.md).
    stock_neutron: bool = False
    # Octavia per region (API + worker, amphora provider, no-op drivers), catalogued
    # as load-balancer; off by default to keep the plain sandbox light.
    octavia: bool = False
    # Cinder per region (API, scheduler, volume) and the gateway's volume API;
    # ``--no-volume`` leaves them out where nothing uses volumes (the OVN tests).
    volume: bool = True
    # The gateway and the Admin API serve https (a private CA in tls/, clouds.yaml's cacert).
    tls: bool = False
    # Regions whose Neutron runs ML2/OVN with their own OVN (NB, SB, northd) and an
    # OVS + ovn-controller chassis in the host namespace (isthmus/sandbox/ovn.py);
    # needs the dataplane. The others run the sandbox binder (kernel VXLAN).
    ovn_regions: tuple[str, ...] = ()
    # isthmus-xjob processes sharing the job database (``--xjob-workers``): the
    # engine's leases keep them from running one key twice (docs/jobs.md).
    xjob_workers: int = 1
    # Every Neutron's database (central's and the regions') on the sandbox's
    # MariaDB (or --db-url) instead of SQLite, as in a production region
    # (``--neutron-db mariadb``): concurrent writers, and a database another host
    # could reach. OVN regions always use MariaDB.
    neutron_mariadb: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_dir", Path(self.state_dir).resolve())
        if self.neutron_page_limit < 0:
            raise ValueError("--neutron-page-limit: must be 0 (unlimited) or more")
        if self.octavia and not self.compute:
            raise ValueError("--octavia: needs the compute services (drop --no-compute)")
        if not self.compute:
            object.__setattr__(self, "volume", False)
        object.__setattr__(self, "ovn_regions", tuple(self.ovn_regions))
        unknown = [r for r in self.ovn_regions if r not in self.regions]
        if unknown:
            raise ValueError(f"--ovn-regions: {', '.join(unknown)} not in --regions ({', '.join(self.regions)})")
        if self.ovn_regions and not (self.dataplane and self.compute):
            raise ValueError("--ovn: needs --dataplane and the compute services (OVN chassis live in the "
                             "dataplane's host namespaces)")
        if not 1 <= self.xjob_workers <= MAX_XJOB_WORKERS:
            raise ValueError(f"--xjob-workers: {self.xjob_workers} is not between 1 and {MAX_XJOB_WORKERS}")
        if not 1024 <= self.base_port <= 65535 - 10 * (len(self.regions) + 1):
            raise ValueError(f"--base-port: {self.base_port} leaves no room for the sandbox's ports")

    # --- ports -----------------------------------------------------------------
    @property
    def keystone_port(self) -> int:
        return self.base_port + KEYSTONE_OFFSET

    @property
    def central_neutron_port(self) -> int:
        return self.base_port + CENTRAL_NEUTRON_OFFSET

    @property
    def gateway_port(self) -> int:
        return self.base_port + GATEWAY_OFFSET

    @property
    def admin_api_port(self) -> int:
        return self.base_port + ADMIN_API_OFFSET

    @property
    def xjob_metrics_port(self) -> int:
        return self.xjob_metrics_port_of(1)

    def xjob_metrics_port_of(self, worker: int) -> int:
        return self.base_port + XJOB_METRICS_OFFSET + worker - 1

    @property
    def xjob_names(self) -> list[str]:
        """The job workers' service names: isthmus-xjob, isthmus-xjob-2, ..."""
        return [xjob_name(i) for i in range(1, self.xjob_workers + 1)]

    def metrics_urls(self) -> dict[str, str]:
        """Where each Isthmus service serves Prometheus metrics (docs/metrics.md)."""
        return {
            **{xjob_name(i): self.url(self.xjob_metrics_port_of(i), "/metrics")
               for i in range(1, self.xjob_workers + 1)},
            "isthmus-admin": self.isthmus_url(self.admin_api_port, "/metrics"),
            "isthmus-gateway": self.isthmus_url(self.gateway_port, "/metrics"),
        }

    @property
    def mariadb_port(self) -> int:
        return self.base_port + MARIADB_OFFSET

    def region_port(self, region: str, service: str) -> int:
        index = self.regions.index(region)
        return self.base_port + 10 * (index + 1) + REGION_OFFSETS[service]

    @property
    def stock_neutron_port(self) -> int:
        return self.base_port + STOCK_NEUTRON_OFFSET

    def neutron_port(self, region: str) -> int:
        if region == CENTRAL_REGION:
            return self.central_neutron_port
        if region == STOCK_NEUTRON:
            return self.stock_neutron_port
        return self.region_port(region, "neutron")

    def is_ovn(self, region: str) -> bool:
        return region in self.ovn_regions

    def neutron_on_mariadb(self, region: str) -> bool:
        """Whether this Neutron's database is on MariaDB (the stock Neutron's never is)."""
        return self.is_ovn(region) or (self.neutron_mariadb and region != STOCK_NEUTRON)

    @property
    def uses_mariadb(self) -> bool:
        """Some service's database is on MariaDB (the private server or --db-url)."""
        return self.compute or self.neutron_mariadb

    def availability_zone(self, region: str) -> str:
        return availability_zone(self.regions.index(region))

    # --- URLs ------------------------------------------------------------------
    @property
    def auth_url(self) -> str:
        return f"http://127.0.0.1:{self.keystone_port}/v3"

    def url(self, port: int, path: str = "") -> str:
        return f"http://127.0.0.1:{port}{path}"

    def isthmus_url(self, port: int, path: str = "") -> str:
        """A URL of the gateway or the Admin API: https with ``--tls``."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}{path}"

    @property
    def tls_dir(self) -> Path:
        return self.state_dir / "tls"

    @property
    def ca_file(self) -> str | None:
        """The private CA clients trust (``--tls``), else None."""
        return str(self.tls_dir / "ca.pem") if self.tls else None

    def tls_files(self) -> TLSFiles | None:
        """The server certificate the gateway and the Admin API present (``--tls``),
        made with its CA on first use (isthmus/sandbox/tls.py), else None."""
        if not self.tls:
            return None
        from isthmus.sandbox import tls

        made = tls.ensure(self.tls_dir)
        return TLSFiles(str(made.cert), str(made.key))

    # --- paths -----------------------------------------------------------------
    @property
    def etc(self) -> Path:
        return self.state_dir / "etc"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run(self) -> Path:
        return self.state_dir / "run"

    @property
    def data(self) -> Path:
        return self.state_dir / "data"

    @property
    def clouds_yaml(self) -> Path:
        return self.state_dir / "clouds.yaml"

    @property
    def isthmus_db_url(self) -> str:
        """Isthmus' own state (registry, jobs): SQLite, the embedded default."""
        return self.sqlite_url("isthmus")

    def sqlite_path(self, name: str) -> Path:
        return self.data / f"{name}.sqlite"

    def sqlite_url(self, name: str) -> str:
        return f"sqlite:///{self.sqlite_path(name)}"

    @property
    def rabbit_vhost_prefix(self) -> str:
        """One vhost per region: Nova's queue names (conductor, scheduler) carry
        no region, so two regions on one vhost would consume each other's calls."""
        digest = hashlib.sha1(str(self.state_dir).encode()).hexdigest()[:8]
        return f"isthmus-{self.base_port}-{digest}"

    def rabbit_vhost(self, region: str) -> str:
        return f"{self.rabbit_vhost_prefix}-{region}"

    def make_dirs(self) -> None:
        for path in (self.etc, self.logs, self.run, self.data):
            path.mkdir(parents=True, exist_ok=True)

    # --- persistence -------------------------------------------------------------
    def save(self) -> None:
        record = dataclasses.asdict(self)
        record["state_dir"] = str(self.state_dir)
        record["regions"] = list(self.regions)
        record["ovn_regions"] = list(self.ovn_regions)
        (self.state_dir / STATE_FILE).write_text(json.dumps(record, indent=2) + "\n")

    @classmethod
    def load(cls, state_dir: Path) -> Layout | None:
        path = Path(state_dir) / STATE_FILE
        if not path.exists():
            return None
        record = json.loads(path.read_text())
        record["regions"] = tuple(record["regions"])
        record["ovn_regions"] = tuple(record.get("ovn_regions") or ())
        return cls(**record)
