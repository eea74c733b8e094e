"""WSGI application factories for gunicorn: ``isthmus.sandbox.wsgi:neutron()``.

Keystone, Neutron and Nova parse ``sys.argv`` with oslo.config while building their
app, and gunicorn's own arguments make them exit; each factory clears argv first.
Configuration comes from the environment variables each service documents
(``OS_<SERVICE>_CONFIG_DIR``/``_FILES``), set by the sandbox when it starts gunicorn.
"""

from __future__ import annotations

import sys


def _clear_argv(prog: str) -> None:
    sys.argv = [prog]


def keystone():
    _clear_argv("keystone")
    from keystone.server import wsgi

    return wsgi.initialize_public_application()


def neutron():
    _clear_argv("neutron-api")
    from neutron import server
    from neutron.server import api

    return server.boot_server(api.api_server, prog="neutron-api")


def nova_api():
    _clear_argv("nova-api")
    from nova.wsgi import osapi_compute

    return osapi_compute.application


def placement():
    _clear_argv("placement-api")
    from placement.wsgi import api

    return api.application


def glance():
    _clear_argv("glance-api")
    from glance.wsgi import api

    return api.application


def cinder():
    _clear_argv("cinder-api")
    from cinder.wsgi import api

    return api.application
