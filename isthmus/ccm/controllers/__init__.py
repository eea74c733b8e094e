"""The CCM's controllers: node initialisation (``node``), node lifecycle
(``lifecycle``) and LoadBalancer Services (``service``), each fed by a work queue
of the framework in ``isthmus.ccm.kube`` and calling the providers in
``isthmus.ccm.openstack``."""
