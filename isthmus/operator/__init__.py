"""isthmus-operator: the whole multi-region control plane from custom resources.

Layout (docs/operator.md):

* :mod:`crds` — the CustomResourceDefinitions (group ``isthmus.dev``), built in Python;
* :mod:`model` — typed views of the custom resources' specs, with defaults;
* :mod:`objects` — pure functions: a resource's spec -> the Kubernetes objects it owns;
* :mod:`conditions` — ``metav1.Condition`` helpers and the aggregation rules;
* :mod:`handlers` — the kopf handlers that apply all of the above to a cluster.

Product code: it never imports :mod:`isthmus.sandbox`.
"""

GROUP = "isthmus.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
MANAGED_BY = "isthmus-operator"
