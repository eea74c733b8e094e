"""The services serve TLS from ``[ssl]`` (isthmus/tls.py): https verified against
the CA works, plain http to the same port fails."""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.request

import pytest
from aiohttp import web
from oslo_config import cfg

from isthmus import tls
from isthmus.sandbox import tls as sandbox_tls

pytestmark = pytest.mark.component  # a listening socket (tests/tiers.py)


def _conf(certs: sandbox_tls.Certificates | None) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    tls.register_opts(conf)
    conf([], default_config_files=[])
    if certs is not None:
        conf.set_override("cert_file", str(certs.cert), group="ssl")
        conf.set_override("key_file", str(certs.key), group="ssl")
    return conf


def test_without_a_certificate_there_is_no_context_and_half_a_pair_is_an_error(tmp_path):
    assert tls.server_context(_conf(None)) is None
    conf = _conf(None)
    conf.set_override("key_file", str(tmp_path / "k.pem"), group="ssl")
    with pytest.raises(ValueError, match="cert_file and key_file"):
        tls.server_context(conf)


def test_an_aiohttp_service_serves_https_only(tmp_path):
    certs = sandbox_tls.ensure(tmp_path / "tls")

    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def run() -> tuple[str, str, str]:
        app = web.Application()
        app.router.add_get("/", hello)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.server_context(_conf(certs)))
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            def fetch(url: str, context: ssl.SSLContext | None) -> str:
                with urllib.request.urlopen(url, timeout=5, context=context) as reply:
                    return reply.read().decode()

            async def outcome(url: str, context: ssl.SSLContext | None) -> str:
                try:
                    return await asyncio.to_thread(fetch, url, context)
                except (urllib.error.URLError, ConnectionError, OSError) as exc:
                    return f"failed: {exc}"

            verified = ssl.create_default_context(cafile=str(certs.ca))
            return (await outcome(f"https://127.0.0.1:{port}/", verified),
                    await outcome(f"http://127.0.0.1:{port}/", None),
                    await outcome(f"https://127.0.0.1:{port}/", ssl.create_default_context()))
        finally:
            await runner.cleanup()

    good, plain, untrusted = asyncio.run(run())
    assert good == "hello"
    assert plain.startswith("failed")  # plain http to the TLS port
    assert untrusted.startswith("failed") and "CERTIFICATE_VERIFY_FAILED" in untrusted  # no CA: refused
