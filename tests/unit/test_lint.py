"""ruff and mypy over the whole tree, as configured in pyproject.toml ([tool.ruff],
[tool.mypy]): a finding of either fails the unit tier. Both come with the
``test`` extra (pinned in constraints.txt)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    # The interpreter running the tests: its environment has the libraries mypy reads.
    return subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", ".", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing() -> None:
    # Incremental: .mypy_cache in the work tree makes a re-run take seconds (a first one, about a minute).
    done = _run("mypy", timeout=840)
    assert done.returncode == 0, done.stdout + done.stderr
