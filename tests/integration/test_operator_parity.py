"""The operator renders the configuration the running sandbox uses.

One renderer (``isthmus.configs``) writes the sandbox's files and the operator's
Secrets. Here the real ``isthmus operator render`` renders a MultiRegionCloud for
the sandbox's regions, and each rendered INI is compared, key by key, with the
file the running sandbox's service reads. Only a few kinds of difference are allowed,
each listed below with its reason: values that name the deployment (addresses,
passwords, paths, where the database is), and keys only one side has because the
sandbox runs every service in one process on a laptop. Anything else that differs
is drift between the two and fails.
"""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sandboxes import BIN, Sandbox

pytestmark = pytest.mark.integration

# Keys whose *value* names the deployment: both sides must have the key, values differ.
WHERE = {
    ("DEFAULT", "transport_url"), ("DEFAULT", "state_path"), ("database", "connection"),
    ("oslo_concurrency", "lock_path"), ("gateway", "bind_host"), ("gateway", "bind_port"),
    ("gateway", "public_url"), ("admin_api", "bind_host"), ("admin_api", "bind_port"),
    ("metrics", "bind_host"), ("metrics", "port"), ("DEFAULT", "bind_host"), ("DEFAULT", "bind_port"),
    ("isthmus", "database_connection"), ("api_database", "connection"),
}
WHERE_KEYS = {"auth_url", "www_authenticate_uri", "password"}  # in every credentials section

# Keys only the sandbox writes: one process per service on one machine, no agents.
SANDBOX_ONLY = {
    ("DEFAULT", "api_paste_config"),  # the venv's paste file; the image has it at the default path
    ("DEFAULT", "rpc_workers"), ("DEFAULT", "rpc_state_report_workers"),  # one process, no RPC workers
    ("DEFAULT", "dhcp_agent_notification"),  # no DHCP agent in the sandbox
    ("DEFAULT", "notify_nova_on_port_status_changes"), ("DEFAULT", "notify_nova_on_port_data_changes"),
    ("DEFAULT", "pagination_max_limit"),  # small pages so tests cross page boundaries
    ("agent", "report_interval"),  # no agents report
    ("quotas", "*"),  # the tour and tests create many objects
    ("isthmus_sandbox", "*"),  # the sandbox's port binder and dataplane socket
    ("jobs", "*"),  # short leases and retries: the sandbox favours quick convergence
    ("isthmus", "resync_interval"),  # idem
    ("gateway", "catalog_ttl"),  # tests rename endpoints and want the gateway to notice soon
    ("gateway", "list_timeout"),  # the default, written out
    # Nova and Cinder: one machine with no hypervisor and no disk.
    ("DEFAULT", "host"), ("DEFAULT", "my_ip"),  # one host name per service on one machine
    ("DEFAULT", "compute_driver"), ("DEFAULT", "instances_path"),  # the fake driver, local paths
    ("DEFAULT", "vif_plugging_is_fatal"), ("DEFAULT", "vif_plugging_timeout"),  # no VIFs to plug
    ("DEFAULT", "periodic_fuzzy_delay"),  # tests want periodic tasks at once
    ("scheduler", "*"), ("conductor", "*"),  # one worker each, hosts discovered every 2 s
    ("vnc", "*"), ("quota", "*"),  # no consoles; bursts of boots
    ("DEFAULT", "enabled_backends"), ("fake", "*"),  # cinder's no-disk backend
    ("DEFAULT", "resource_query_filters_file"),  # the venv's copy; the image has it at the default path
    ("DEFAULT", "quota_volumes"), ("DEFAULT", "quota_snapshots"), ("DEFAULT", "quota_gigabytes"),
    ("DEFAULT", "quota_backups"), ("DEFAULT", "quota_backup_gigabytes"),
    ("coordination", "*"),  # a file lock on one machine
}
# Keys only the operator writes.
OPERATOR_ONLY = {
    # A database server's driver timeouts (isthmus.configs.ini.database): the sandbox's
    # Neutrons run on SQLite files, which have none.
    ("database", "connection_parameters"),
    # The APIGateway's selected regions (regionSelector); the sandbox's gateway serves every
    # registered region, which an empty list means (tests/unit/gateway/test_capacity.py
    # covers a gateway for some regions).
    ("gateway", "regions"),
}
# Keys whose value the sandbox sets differently on purpose (key present on both sides).
SANDBOX_VALUE = {
    ("ml2", "mechanism_drivers"),  # the sandbox's binder stands in for Open vSwitch agents
    # The gateway reaches the regions by the catalogue's public URLs on a laptop, by the
    # in-cluster (internal) Services in Kubernetes.
    ("service_credentials", "interface"),
    ("nova", "interface"),  # Cinder calls Nova the same way, for the same reason
}


def sandbox_cloud(sandbox: Sandbox) -> list[dict[str, Any]]:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pw", "namespace": "os"},
              "stringData": {"admin-password": "a", "service-password": "s", "database-password": "d",
                             "transport-url": "rabbit://u:p@mq:5672/"}}
    cloud = {"apiVersion": "isthmus.dev/v1alpha1", "kind": "MultiRegionCloud",
             "metadata": {"name": "sb", "namespace": "os"},
             "spec": {"secret": "pw", "database": {"host": "db"},
                      "regions": [{"name": r, "nova": {"enabled": True}, "cinder": {"enabled": True}}
                                  for r in sandbox.regions]}}
    return [secret, cloud]


def rendered_files(sandbox: Sandbox, tmp_path: Path) -> dict[tuple[str, str], str]:
    source = tmp_path / "cloud.yaml"
    source.write_text(yaml.safe_dump_all(sandbox_cloud(sandbox)))
    out = subprocess.run([str(BIN / "isthmus"), "operator", "render", "-f", str(source)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    files = {}
    for obj in yaml.safe_load_all(out):
        if obj and obj["kind"] == "Secret":
            for key, text in (obj.get("stringData") or {}).items():
                files[obj["metadata"]["name"], key] = text
    return files


def ini(text: str) -> dict[tuple[str, str], str]:
    parser = configparser.ConfigParser(interpolation=None, default_section="__none__")
    parser.read_string(text)
    return {(section, key): value for section in parser.sections() for key, value in parser[section].items()}


def allowed(key: tuple[str, str], table: set[tuple[str, str]]) -> bool:
    return key in table or (key[0], "*") in table


def drift(sandbox_file: Path, rendered: str) -> list[str]:
    ours, theirs = ini(sandbox_file.read_text()), ini(rendered)
    problems = []
    for key in sorted(set(ours) | set(theirs)):
        if key not in theirs:
            if not allowed(key, SANDBOX_ONLY):
                problems.append(f"only the sandbox has [{key[0]}] {key[1]} = {ours[key]}")
        elif key not in ours:
            if not allowed(key, OPERATOR_ONLY):
                problems.append(f"only the operator has [{key[0]}] {key[1]} = {theirs[key]}")
        elif ours[key] != theirs[key] and not (allowed(key, WHERE) or key[1] in WHERE_KEYS
                                               or allowed(key, SANDBOX_VALUE)):
            problems.append(f"[{key[0]}] {key[1]}: sandbox {ours[key]!r}, operator {theirs[key]!r}")
    return problems


def pairs(sandbox: Sandbox) -> list[tuple[Path, tuple[str, str]]]:
    etc = sandbox.state_dir / "etc"
    out = [(etc / "isthmus" / "xjob.conf", ("sb-central-network-xjob-config", "xjob.conf")),
           (etc / "isthmus" / "admin-api.conf", ("sb-central-network-admin-api-config", "admin-api.conf")),
           (etc / "isthmus" / "gateway.conf", ("sb-api-gateway-config", "gateway.conf"))]
    for conf in ("neutron.conf", "ml2_conf.ini"):
        out.append((etc / "neutron-CentralRegion" / conf, ("sb-central-network-neutron-config", conf)))
        for region in sandbox.regions:
            out.append((etc / f"neutron-{region}" / conf, (f"sb-region-{region.lower()}-neutron-config", conf)))
    for region in sandbox.regions:
        for service in ("nova", "cinder"):
            out.append((etc / f"{service}-{region}" / f"{service}.conf",
                        (f"sb-region-{region.lower()}-{service}-config", f"{service}.conf")))
    return out


def test_operator_renders_the_configuration_the_running_sandbox_uses(sandbox: Sandbox, tmp_path: Path) -> None:
    files = rendered_files(sandbox, tmp_path)
    report = {}
    for path, secret in pairs(sandbox):
        assert path.is_file(), f"the sandbox has no {path}"
        assert secret in files, f"the operator renders no {secret}; it renders {sorted(files)}"
        problems = drift(path, files[secret])
        if problems:
            report[str(path.relative_to(sandbox.state_dir))] = problems
    assert not report, yaml.safe_dump(report, width=200)


def test_the_parity_check_sees_drift(sandbox: Sandbox, tmp_path: Path) -> None:
    """The comparison above can fail: a changed product key is reported."""
    path, secret = next((p, s) for p, s in pairs(sandbox) if s[0].startswith("sb-region-") and s[1] == "neutron.conf")
    changed = rendered_files(sandbox, tmp_path)[secret].replace("core_plugin = isthmus_local", "core_plugin = ml2")
    assert any("core_plugin" in p for p in drift(path, changed))
