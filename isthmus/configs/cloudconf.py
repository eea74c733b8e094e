"""OCCM ``cloud.conf`` (gcfg syntax) for ``isthmus-ccm`` or the upstream OCCM.

Read back by :mod:`isthmus.ccm.config`; the ``regions`` lines are Isthmus'
multi-region extension (docs/ccm.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CloudConfValues:
    auth_url: str
    region: str
    regions: tuple[str, ...] = ()
    application_credential_id: str = ""
    application_credential_secret: str = ""
    request_timeout: str = "20s"
    floating_network_id: str = ""
    subnet_id: str = ""
    lb_provider: str = ""


def quote(value: str) -> str:
    """A gcfg string value: always quoted, so ``;``/``#`` and blanks survive."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def cloud_conf(values: CloudConfValues) -> str:
    lines = ["[Global]", f"auth-url = {quote(values.auth_url)}"]
    if values.application_credential_id:
        lines.append(f"application-credential-id = {quote(values.application_credential_id)}")
        lines.append(f"application-credential-secret = {quote(values.application_credential_secret)}")
    lines.append(f"region = {quote(values.region)}")
    # The search order is region, then the regions lines (duplicates dropped).
    lines += [f"regions = {quote(region)}" for region in values.regions]
    lines += ["", "[Metadata]", f"request-timeout = {quote(values.request_timeout)}"]
    lb = {"floating-network-id": values.floating_network_id, "subnet-id": values.subnet_id,
          "lb-provider": values.lb_provider}
    if any(lb.values()):
        lines += ["", "[LoadBalancer]"] + [f"{key} = {quote(value)}" for key, value in lb.items() if value]
    return "\n".join(lines) + "\n"
