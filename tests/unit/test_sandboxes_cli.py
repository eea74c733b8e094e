"""tests/sandboxes.py: the note tools/test.sh prints about a demo sandbox left running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from isthmus.sandbox.layout import DEFAULT_STATE_DIR, Layout
from isthmus.sandbox.process import ServiceRecord
from tests import sandboxes


def _demo(cwd: Path, pid: int) -> Layout:
    layout = Layout((cwd / DEFAULT_STATE_DIR).resolve(), base_port=21000)
    layout.make_dirs()
    layout.save()
    ServiceRecord("keystone", pid, str(layout.logs / "keystone.log")).save(layout.run)
    return layout


def test_a_running_demo_sandbox_is_named_with_how_to_stop_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    layout = _demo(tmp_path, os.getpid())  # this process stands for a live service
    assert sandboxes.main(["others"]) == 0
    out = capsys.readouterr().out
    assert f"the sandbox in {layout.state_dir} (ports 21000-21029) is running" in out
    assert f"isthmus sandbox down --state-dir {layout.state_dir}" in out


def test_a_stopped_or_absent_demo_sandbox_says_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert sandboxes.running_others() == []
    _demo(tmp_path, 2**22 + 12345)  # no such process
    assert sandboxes.main(["others"]) == 0
    assert capsys.readouterr().out == ""


def test_bad_usage_is_exit_2():
    assert sandboxes.main(["nope"]) == 2


@pytest.mark.parametrize("argv", [["start"], ["start", "a", "b"]])
def test_start_needs_one_state_dir(argv):
    assert sandboxes.main(argv) == 2
