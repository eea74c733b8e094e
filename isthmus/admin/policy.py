"""oslo.policy rules of the Admin API, with their defaults registered in code.

Every rule defaults to ``rule:admin_api`` = ``role:admin``: a caller without the
admin role gets 403 on every operation (Tricircle mixed 401 and 403). An
operator may override any rule in the policy file (``[oslo_policy]
policy_file``, YAML or JSON); ``oslopolicy-sample-generator --namespace
isthmus-admin`` prints the defaults.

The ``...:all_projects`` rules decide whether a caller sees and names other
projects' routings, bindings and jobs. Admins may (the API is admin-only by default, and
an admin listing only the routings of the ``admin`` project would be useless);
anyone the operator lets in through a relaxed rule is confined to the project of
their token, as Tricircle confined everyone.
"""

from __future__ import annotations

from oslo_config import cfg
from oslo_policy import policy

ADMIN_API = "admin_api"
ROUTINGS_ALL_PROJECTS = "admin_api:routings:all_projects"
JOBS_ALL_PROJECTS = "admin_api:jobs:all_projects"
BINDINGS_ALL_PROJECTS = "admin_api:bindings:all_projects"


_ADMIN_ONLY = f"rule:{ADMIN_API}"

# One row a rule: name, check string, description, and the operation it guards
# ("METHOD /path"), or None for a rule the handlers consult rather than a route.
# The order is that of the sample file oslopolicy-sample-generator prints.
_DEFAULTS: tuple[tuple[str, str, str, str | None], ...] = (
    (ADMIN_API, "role:admin", "Who may use the Admin API at all.", None),
    ("admin_api:pods:create", _ADMIN_ONLY, "Register a region as a pod.", "POST /v1.0/pods"),
    ("admin_api:pods:list", _ADMIN_ONLY, "List pods.", "GET /v1.0/pods"),
    ("admin_api:pods:show", _ADMIN_ONLY, "Show a pod.", "GET /v1.0/pods/{pod_id}"),
    ("admin_api:pods:delete", _ADMIN_ONLY, "Delete a pod and its routings.", "DELETE /v1.0/pods/{pod_id}"),
    ("admin_api:routings:create", _ADMIN_ONLY, "Create a routing.", "POST /v1.0/routings"),
    ("admin_api:routings:list", _ADMIN_ONLY, "List routings.", "GET /v1.0/routings"),
    ("admin_api:routings:show", _ADMIN_ONLY, "Show a routing.", "GET /v1.0/routings/{id}"),
    ("admin_api:routings:update", _ADMIN_ONLY, "Update a routing.", "PUT /v1.0/routings/{id}"),
    ("admin_api:routings:delete", _ADMIN_ONLY, "Delete a routing.", "DELETE /v1.0/routings/{id}"),
    (ROUTINGS_ALL_PROJECTS, _ADMIN_ONLY, "See and name routings of any project (else only the token's project).", None),
    ("admin_api:bindings:create", _ADMIN_ONLY, "Bind a project to a regional pod.", "POST /v1.0/bindings"),
    ("admin_api:bindings:list", _ADMIN_ONLY, "List project-to-pod bindings.", "GET /v1.0/bindings"),
    ("admin_api:bindings:show", _ADMIN_ONLY, "Show a binding.", "GET /v1.0/bindings/{id}"),
    ("admin_api:bindings:delete", _ADMIN_ONLY, "Delete a binding.", "DELETE /v1.0/bindings/{id}"),
    (BINDINGS_ALL_PROJECTS, _ADMIN_ONLY, "See and bind any project (else only the token's project).", None),
    ("admin_api:jobs:schemas", _ADMIN_ONLY, "List job types and their resource keys.", "GET /v1.0/jobs/schemas"),
    ("admin_api:jobs:create", _ADMIN_ONLY, "Queue a job.", "POST /v1.0/jobs"),
    ("admin_api:jobs:list", _ADMIN_ONLY, "List jobs.", "GET /v1.0/jobs"),
    ("admin_api:jobs:show", _ADMIN_ONLY, "Show a job.", "GET /v1.0/jobs/{job_id}"),
    ("admin_api:jobs:delete", _ADMIN_ONLY, "Delete a job that is not running.", "DELETE /v1.0/jobs/{job_id}"),
    ("admin_api:jobs:redo", _ADMIN_ONLY, "Re-queue a failed or waiting job now.", "PUT /v1.0/jobs/{job_id}"),
    (JOBS_ALL_PROJECTS, _ADMIN_ONLY, "See and queue jobs of any project (else only the token's project).", None),
)


def _default(name: str, check_str: str, description: str, operation: str | None) -> policy.RuleDefault:
    if operation is None:
        return policy.RuleDefault(name, check_str, description=description)
    method, path = operation.split(" ", 1)
    return policy.DocumentedRuleDefault(
        name=name, check_str=check_str, description=description,
        operations=[{"method": method, "path": path}])


RULES: list[policy.RuleDefault] = [_default(*row) for row in _DEFAULTS]


def list_rules() -> list[policy.RuleDefault]:
    """For oslopolicy-sample-generator (entry point ``oslo.policy.policies``)."""
    return RULES


def make_enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(RULES)
    return enforcer
