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


def _rule(name: str, description: str, method: str, path: str) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=f"rule:{ADMIN_API}", description=description,
        operations=[{"method": method, "path": path}])


RULES: list[policy.RuleDefault] = [
    policy.RuleDefault(ADMIN_API, "role:admin", description="Who may use the Admin API at all."),
    _rule("admin_api:pods:create", "Register a region as a pod.", "POST", "/v1.0/pods"),
    _rule("admin_api:pods:list", "List pods.", "GET", "/v1.0/pods"),
    _rule("admin_api:pods:show", "Show a pod.", "GET", "/v1.0/pods/{pod_id}"),
    _rule("admin_api:pods:delete", "Delete a pod and its routings.", "DELETE", "/v1.0/pods/{pod_id}"),
    _rule("admin_api:routings:create", "Create a routing.", "POST", "/v1.0/routings"),
    _rule("admin_api:routings:list", "List routings.", "GET", "/v1.0/routings"),
    _rule("admin_api:routings:show", "Show a routing.", "GET", "/v1.0/routings/{id}"),
    _rule("admin_api:routings:update", "Update a routing.", "PUT", "/v1.0/routings/{id}"),
    _rule("admin_api:routings:delete", "Delete a routing.", "DELETE", "/v1.0/routings/{id}"),
    policy.RuleDefault(ROUTINGS_ALL_PROJECTS, f"rule:{ADMIN_API}",
                       description="See and name routings of any project (else only the token's project)."),
    _rule("admin_api:bindings:create", "Bind a project to a regional pod.", "POST", "/v1.0/bindings"),
    _rule("admin_api:bindings:list", "List project-to-pod bindings.", "GET", "/v1.0/bindings"),
    _rule("admin_api:bindings:show", "Show a binding.", "GET", "/v1.0/bindings/{id}"),
    _rule("admin_api:bindings:delete", "Delete a binding.", "DELETE", "/v1.0/bindings/{id}"),
    policy.RuleDefault(BINDINGS_ALL_PROJECTS, f"rule:{ADMIN_API}",
                       description="See and bind any project (else only the token's project)."),
    _rule("admin_api:jobs:schemas", "List job types and their resource keys.", "GET", "/v1.0/jobs/schemas"),
    _rule("admin_api:jobs:create", "Queue a job.", "POST", "/v1.0/jobs"),
    _rule("admin_api:jobs:list", "List jobs.", "GET", "/v1.0/jobs"),
    _rule("admin_api:jobs:show", "Show a job.", "GET", "/v1.0/jobs/{job_id}"),
    _rule("admin_api:jobs:delete", "Delete a job that is not running.", "DELETE", "/v1.0/jobs/{job_id}"),
    _rule("admin_api:jobs:redo", "Re-queue a failed or waiting job now.", "PUT", "/v1.0/jobs/{job_id}"),
    policy.RuleDefault(JOBS_ALL_PROJECTS, f"rule:{ADMIN_API}",
                       description="See and queue jobs of any project (else only the token's project)."),
]


def list_rules() -> list[policy.RuleDefault]:
    """For oslopolicy-sample-generator (entry point ``oslo.policy.policies``)."""
    return RULES


def make_enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(RULES)
    return enforcer
