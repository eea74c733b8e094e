"""Kubernetes pieces shared by the components that run in a cluster: the CCM (in a
tenant's cluster) and the operator (in the control plane's). Only ``kubernetes``
client code: neither component's logic lives here."""
