"""The Isthmus Admin API (service type ``multiregion``): pods, routings, jobs.

It follows Tricircle's Admin API (docs/admin-api.md); the deliberate differences
are listed in :mod:`isthmus.admin.app`.

Framework: plain WebOb with a ten-line route table (:mod:`isthmus.admin.app`).
Every middleware this service needs — keystonemiddleware ``auth_token``,
oslo.middleware ``request_id``/``sizelimit``/``http_proxy_to_wsgi`` — is itself
WebOb-based, and the API has eleven routes with no templates, forms or sessions,
so a framework (pecan, which Tricircle used and which is in maintenance mode, or
Flask) would add a dependency and a second request model without removing any
code. WebOb is maintained by the Pylons project and is what Neutron, Nova and
neutron-lib build their WSGI layers on.

Layout:
- :mod:`~isthmus.admin.config` — oslo.config options (``[DEFAULT] bind_host`` ...);
- :mod:`~isthmus.admin.policy` — oslo.policy defaults (``admin_api:*`` = ``role:admin``);
- :mod:`~isthmus.admin.faults` — JSON error bodies and the error -> HTTP status map;
- :mod:`~isthmus.admin.app` — routing, authentication/authorisation, the controllers;
- :mod:`~isthmus.admin.wsgi` — the middleware pipeline, ``application`` and ``isthmus-admin``.
"""
