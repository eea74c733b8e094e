"""The local plugin knows Isthmus' own service user, whose deletes stay regional."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from keystoneauth1 import exceptions as ks_exc

from isthmus.network.local.central import ServiceIdentity


class Session:
    def __init__(self, user_id: str | None) -> None:
        self.user_id = user_id
        self.asked = 0

    def get_user_id(self) -> str:
        self.asked += 1
        if self.user_id is None:
            raise ks_exc.ConnectFailure("keystone unreachable")
        return self.user_id


@dataclass
class Context:
    user_id: str | None
    user_name: str | None = None
    user_domain_name: str | None = None


def identity(session: Session, name: str | None = "isthmus", domain: str | None = "Default") -> ServiceIdentity:
    return ServiceIdentity(cast(Any, session), name, domain)


def test_the_caller_is_known_by_user_id_asked_once():
    session = Session("u-isthmus")
    me = identity(session)
    assert me.is_caller(Context("u-isthmus", "isthmus"))
    assert not me.is_caller(Context("u-other", "isthmus"))  # same name elsewhere: not us, the id decides
    assert not me.is_caller(Context(None))
    assert session.asked == 1


def test_while_keystone_cannot_say_the_id_the_name_and_domain_decide():
    session = Session(None)
    me = identity(session)
    assert me.is_caller(Context("u-isthmus", "isthmus", "Default"))
    assert me.is_caller(Context("u-isthmus", "isthmus"))  # no domain name in the request
    assert not me.is_caller(Context("u-x", "isthmus", "other-domain"))
    assert not me.is_caller(Context("u-x", "demo", "Default"))
    session.user_id = "u-isthmus"  # Keystone answers again: the id is learnt
    assert not me.is_caller(Context("u-x", "isthmus", "Default"))


def test_without_a_configured_name_nobody_matches_by_name():
    assert not identity(Session(None), name=None).is_caller(Context("u", None))
