"""Fault campaigns on a running sandbox (docs/faults.md): steady user load while
faults are injected one at a time or in pairs, and after each is lifted, the
invariants of "nothing is lost" checked until they hold (or the report says
which did not).

``faults``: what can go wrong and how it is undone; ``load``: the user's work and
its ledger; ``invariants``: what must be true afterwards (pure checks over a
snapshot); ``run``: the seeded plan, the loop and the JSON report.
"""
