"""Time and peak memory of ``isthmus sandbox up``, without and with compute.

Prints a table; ratios are against the ``--no-compute`` run measured in the same
invocation (machines are noisy, absolute numbers are not comparable across runs).

    .venv/bin/python bench/sandbox_startup.py [--rounds N] [--base-port P]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _group_rss_mib(state_dir: Path) -> float:
    """Total RSS of every process in the sandbox's process groups (one per service)."""
    from isthmus.sandbox.process import ServiceRecord

    groups = {r.pid for r in ServiceRecord.load_all(state_dir / "run")}
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) in groups:
                total += int(fields[21]) * 4096  # rss pages
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20


def measure(extra: list[str], base_port: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="isthmus-bench-") as tmp:
        state = Path(tmp) / "sb"
        peak = 0.0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _group_rss_mib(state))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        up = subprocess.run([str(BIN / "isthmus"), "sandbox", "up", "--state-dir", str(state),
                             "--base-port", str(base_port), *extra], capture_output=True, text=True)
        elapsed = time.monotonic() - started
        peak = max(peak, _group_rss_mib(state))
        done.set()
        sampler.join()
        subprocess.run([str(BIN / "isthmus"), "sandbox", "down", "--state-dir", str(state)], capture_output=True)
        if up.returncode != 0:
            raise SystemExit(f"sandbox up {' '.join(extra)} failed:\n{up.stdout}\n{up.stderr}")
        return elapsed, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base-port", type=int, default=45000)
    args = parser.parse_args()
    modes = [("no compute (baseline)", ["--no-compute"]), ("full (2 regions, compute)", [])]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in modes}
    for _ in range(args.rounds):
        for name, extra in modes:  # interleaved, so drift hits both alike
            results[name].append(measure(extra, args.base_port))
    base_time = statistics.median(t for t, _ in results[modes[0][0]])
    base_mem = statistics.median(m for _, m in results[modes[0][0]])
    print(f"{'mode':28} {'up (s)':>8} {'x base':>7} {'peak RSS (MiB)':>15} {'x base':>7}")
    for name, _ in modes:
        t = statistics.median(x for x, _ in results[name])
        m = statistics.median(y for _, y in results[name])
        print(f"{name:28} {t:8.1f} {t / base_time:7.2f} {m:15.0f} {m / base_mem:7.2f}")
    print(f"(median of {args.rounds} round(s); RSS summed over every sandbox process)")


if __name__ == "__main__":
    main()
