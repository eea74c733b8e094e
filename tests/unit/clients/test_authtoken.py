"""keystonemiddleware in Isthmus' services waits on Keystone a bounded time."""

from __future__ import annotations

from oslo_config import cfg

from isthmus.clients.authtoken import KEYSTONE_TIMEOUT, auth_token_middleware


def _conf(*lines: str, tmp_path) -> cfg.ConfigOpts:
    path = tmp_path / "service.conf"
    path.write_text("[keystone_authtoken]\n" + "\n".join(lines) + "\n")
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(path)], project="isthmus-test")
    return conf


def test_the_keystone_session_is_bounded_by_default(tmp_path):
    middleware = auth_token_middleware(lambda env, start: [], _conf(tmp_path=tmp_path))
    assert middleware._session.timeout == KEYSTONE_TIMEOUT  # keystonemiddleware's own default: none


def test_an_operators_timeout_wins(tmp_path):
    conf = _conf("http_connect_timeout = 3", tmp_path=tmp_path)
    middleware = auth_token_middleware(lambda env, start: [], conf)
    assert middleware._session.timeout == 3
    # A second middleware on the same conf (the gateway's validator and more) registers nothing twice.
    assert auth_token_middleware(lambda env, start: [], conf)._session.timeout == 3
