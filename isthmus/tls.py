"""TLS for the services Isthmus serves (the gateway, the Admin API).

The options are oslo.service's ``[ssl]`` group (``cert_file``, ``key_file``,
``ca_file``), so an operator configures them as for any OpenStack API. With
``cert_file`` set the service serves only https: a plain-http request to its
port fails the handshake. ``ca_file`` makes it ask clients for a certificate
signed by that CA (mutual TLS).
"""

from __future__ import annotations

import ssl

from oslo_config import cfg

GROUP = "ssl"
OPTS: list[cfg.Opt] = [
    cfg.StrOpt("cert_file", help="Certificate (PEM, with its chain) the service presents; set: https only."),
    cfg.StrOpt("key_file", help="Private key of cert_file (PEM)."),
    cfg.StrOpt("ca_file", help="CA bundle that client certificates must chain to (mutual TLS); unset: none asked."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def server_context(conf: cfg.ConfigOpts) -> ssl.SSLContext | None:
    """The server side context of ``[ssl]``, or None when no certificate is set.
    A key without a certificate (or the reverse) is an error naming the option."""
    group = conf[GROUP]
    if not group.cert_file and not group.key_file:
        return None
    if not group.cert_file or not group.key_file:
        raise ValueError("[ssl] cert_file and key_file go together: set both or neither")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(group.cert_file, group.key_file)
    if group.ca_file:
        context.load_verify_locations(group.ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context
