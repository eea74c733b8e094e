"""SANDBOX ONLY: a real dataplane for the sandbox's servers (``sandbox up --dataplane``).

Each region's compute host is a network namespace with an underlay address;
each server is a namespace with one interface per port. A per-region agent
(``agent.py``) reads only that region's Neutron API and programs Linux bridges
and VXLAN devices the way ML2's l2population drives an agent. Product code never
imports this package.
"""
