"""tools/setup.sh and tools/test.sh, run as a developer runs them (the claims of
docs/testing.md: setup returns at once when .venv matches; a bad tier is a usage error)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAMP = REPO / ".venv" / ".installed"
# Only in a checkout whose own .venv tools/setup.sh made: a worktree borrowing
# another checkout's .venv (a symlink) would make setup.sh reinstall it here.
OWN_VENV = STAMP.is_file() and not (REPO / ".venv").is_symlink()


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *argv], cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not OWN_VENV, reason="no .venv of this checkout made by tools/setup.sh")
def test_setup_installs_nothing_when_the_venv_matches():
    before = (STAMP.read_text(), STAMP.stat().st_mtime_ns)
    result = _run("tools/setup.sh")
    assert result.returncode == 0, result.stderr
    assert "ready: .venv matches constraints.txt and pyproject.toml" in result.stdout + result.stderr
    assert "installing Python packages" not in result.stdout + result.stderr
    assert (STAMP.read_text(), STAMP.stat().st_mtime_ns) == before


@pytest.mark.skipif(not OWN_VENV, reason="no .venv of this checkout made by tools/setup.sh")
def test_an_unknown_tier_is_a_usage_error_before_anything_runs():
    result = _run("tools/test.sh", "unit", "nonsense")
    assert result.returncode == 2
    assert "usage: tools/test.sh" in result.stderr
    assert "=== unit tier ===" not in result.stdout  # nothing ran
