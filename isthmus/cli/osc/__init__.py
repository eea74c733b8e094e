"""``openstack multiregion ...``: the OpenStackClient plugin of the Isthmus Admin API.

Loaded by python-openstackclient through the ``openstack.cli.extension`` entry
point (:mod:`isthmus.cli.osc.plugin`); its commands are the
``openstack.multiregion.v1`` entry points (:mod:`isthmus.cli.osc.v1`).
"""
