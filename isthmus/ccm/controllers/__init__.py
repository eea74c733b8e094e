"""Kubernetes controllers of the CCM: node initialisation, node lifecycle, leader election.

They talk to the API server through the official ``kubernetes`` client only,
so tests against an emulator exercise the same calls as a real cluster.
"""
