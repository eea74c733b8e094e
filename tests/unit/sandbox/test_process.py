import socket
import sys
import time

import pytest

from isthmus.sandbox import process
from isthmus.sandbox.config_files import render

pytestmark = pytest.mark.component  # child processes (tests/tiers.py)


def test_stop_kills_the_whole_process_group(tmp_path):
    # A parent that forks a child which ignores SIGTERM: both must be gone after stop().
    script = (
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    open(os.environ['CHILD_FILE'], 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "time.sleep(60)\n"
    )
    child_file = tmp_path / "child.pid"
    record = process.start("demo", [sys.executable, "-c", script], tmp_path / "demo.log", tmp_path,
                           env={"CHILD_FILE": str(child_file)})
    process.wait_until(child_file.exists, "child to start", 10)
    time.sleep(0.1)
    child = int(child_file.read_text())
    process.stop(record, grace=1)
    assert not process.pid_alive(record.pid)
    assert not process.pid_alive(child)
    assert process.ServiceRecord.load_all(tmp_path)[0].pid == record.pid


def test_wait_until_reports_a_dead_process_with_its_log(tmp_path):
    record = process.start("dies", [sys.executable, "-c", "print('bad config'); raise SystemExit(3)"],
                           tmp_path / "dies.log", tmp_path)
    with pytest.raises(process.SandboxError, match="dies exited while waiting") as err:
        process.wait_until(lambda: False, "waiting", 10, record)
    assert "bad config" in str(err.value)


def test_run_failure_names_the_step_and_log(tmp_path):
    with pytest.raises(process.SandboxError, match=r"schema failed \(exit 2\); read .*setup.log"):
        process.run([sys.executable, "-c", "raise SystemExit(2)"], tmp_path / "setup.log", what="schema")


def test_port_checks():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not process.port_is_free(port)
        assert process.port_is_listening(port)
    assert process.port_is_free(port)


def test_ini_render_skips_none_and_joins_lists():
    text = render({"DEFAULT": {"a": True, "b": None, "c": ["x", "y"], "d": 3}})
    assert text.splitlines() == ["[DEFAULT]", "a = true", "c = x,y", "d = 3"]
