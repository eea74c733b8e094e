"""The sandbox's OVN pieces that need no daemon (isthmus/sandbox/ovn.py)."""

import pytest

from isthmus.sandbox import ovn, process


def test_without_the_root_up_says_in_one_line_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ovn.ROOT_ENV, str(tmp_path / "missing"))
    monkeypatch.setattr(ovn.os, "geteuid", lambda: 1000)  # not root: nothing is built
    with pytest.raises(process.SandboxError, match=r"tools/ovn-root.sh"):
        ovn.check_root(lambda line: None)
    (tmp_path / "missing").mkdir()
    (tmp_path / "missing" / ovn.STAMP).write_text("trixie ...\n")
    ovn.check_root(lambda line: None)  # built: nothing to say


def test_the_roots_programs_run_with_its_own_loader_and_libraries(tmp_path, monkeypatch):
    monkeypatch.setenv(ovn.ROOT_ENV, str(tmp_path))
    argv = ovn.binary("ovs-vswitchd")
    assert argv[0] == str(tmp_path / "lib64" / "ld-linux-x86-64.so.2")
    assert argv[1:3] == ["--library-path", str(tmp_path / "usr/lib/x86_64-linux-gnu")]
    # Debian links it through /etc/alternatives, which points outside the root.
    assert argv[3] == str(tmp_path / "usr/lib/openvswitch-switch/ovs-vswitchd")
