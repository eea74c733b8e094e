"""The topology of a multi-region cloud as one model (docs/topology.md).

:mod:`isthmus.topology.model` builds the model from raw API answers with pure
functions; :mod:`isthmus.topology.collect` fetches those answers through the
public REST APIs; the CLI (``openstack multiregion topology``), the dot
renderer and the web page (``isthmus topology serve``) only read the model.
"""
