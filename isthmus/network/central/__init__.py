"""The central plugin: runs inside CentralRegion's neutron-server."""
