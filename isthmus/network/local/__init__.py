"""The local plugin: runs inside every regional neutron-server around ML2."""
