"""``isthmus operator ...``: the Kubernetes operator's offline tools, and the small
commands its Jobs run inside the cluster."""

from __future__ import annotations

import argparse
import os
import sys
from typing import cast


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("operator", help="Kubernetes operator tools (CRDs, offline rendering)")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    tools = parser.add_subparsers(dest="operator_command", metavar="COMMAND")

    crds = tools.add_parser("crds", help="print the CustomResourceDefinitions (YAML)")
    crds.set_defaults(func=run_crds)

    render = tools.add_parser(
        "render", help="print every object the operator would create for a MultiRegionCloud",
        description="Read a MultiRegionCloud (and optionally its passwords Secret and the CCM's credentials "
        "Secret) from FILE and print, as one YAML stream, the child resources and every Secret, ConfigMap, "
        "Deployment, Service and Job the operator would create, without a cluster. Passwords missing from "
        "FILE are printed as $(key) placeholders.")
    render.add_argument("-f", "--filename", required=True, metavar="FILE", help="YAML file ('-' for stdin)")
    render.set_defaults(func=run_render)

    manifests = tools.add_parser(
        "manifests", help="print the operator's own RBAC and Deployment (least privilege)",
        description="Print the operator's ServiceAccount, its RBAC (Roles in the namespaces it watches and "
        "in its target namespaces; cluster-wide only CRD and Namespace discovery) and its Deployment, "
        "configured with the same namespaces. deploy/operator/rbac.yaml and deployment.yaml are "
        "`--part rbac` and `--part deployment` with the defaults.")
    manifests.add_argument("--namespace", default="isthmus-system", help="where the operator runs")
    manifests.add_argument("--watch-namespace", action="append", metavar="NS",
                           help="a namespace whose Isthmus resources it reconciles (repeatable; default openstack)")
    manifests.add_argument("--target-namespace", action="append", metavar="NS",
                           help="another namespace it may write Secrets and ConfigMaps to: a CCM's "
                           "spec.target.namespace (repeatable; default kube-system; '' for none)")
    manifests.add_argument("--image", default="registry.example.com/isthmus/isthmus:0.1.0")
    manifests.add_argument("--part", choices=("all", "rbac", "deployment"), default="all")
    manifests.set_defaults(func=run_manifests)

    pods = tools.add_parser("ensure-pods", help="(Job) register regions as pods in the Isthmus registry")
    pods.add_argument("--db-url", required=True)
    pods.add_argument("pods", nargs="+", metavar="REGION:AZ")
    pods.set_defaults(func=run_ensure_pods)

    gone = tools.add_parser(
        "remove-pod", help="(Job) remove a deleted region's pod from the Isthmus registry",
        description="Remove REGION's pod (and the routings and bindings of Isthmus' copies there) once nothing "
        "users own lives there any more: no port bound there, no server, volume, snapshot or backup routed "
        "there. Otherwise print what still holds it and exit 3 (the Job retries with Kubernetes' backoff "
        "and the operator shows the message on the Region).")
    gone.add_argument("--db-url", required=True)
    gone.add_argument("region")
    gone.set_defaults(func=run_remove_pod)

    reg = tools.add_parser("register-endpoint", help="(Job) register a service's endpoints in Keystone",
                           description="As the admin (OS_AUTH_URL, OS_PASSWORD, OS_REGION_NAME): make sure the "
                           "region, the service and its public and internal endpoints exist with these URLs.")
    reg.add_argument("--service-type", required=True)
    reg.add_argument("--service-name", required=True)
    reg.add_argument("--region", required=True)
    reg.add_argument("--public", required=True)
    reg.add_argument("--internal", required=True)
    reg.add_argument("--delete", action="store_true", help="remove the endpoints instead")
    reg.set_defaults(func=run_register_endpoint)


def run_crds(args: argparse.Namespace) -> int:
    from isthmus.operator.crds import to_yaml

    sys.stdout.write(to_yaml())
    return 0


def run_render(args: argparse.Namespace) -> int:
    import yaml

    from isthmus.operator.preview import render_documents
    from isthmus.operator.yamlio import dump_all

    try:
        text = sys.stdin.read() if args.filename == "-" else open(args.filename, encoding="utf-8").read()
        documents = [d for d in yaml.safe_load_all(text) if d]
        for index, document in enumerate(documents):
            if not isinstance(document, dict):
                raise ValueError(f"document {index + 1} is a {type(document).__name__}, not a Kubernetes object")
        objects = render_documents(documents)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: {args.filename}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(dump_all(objects))
    return 0


def run_manifests(args: argparse.Namespace) -> int:
    from isthmus.operator import install
    from isthmus.operator.yamlio import dump_all

    targets = [t for t in (args.target_namespace if args.target_namespace is not None else ["kube-system"]) if t]
    setup = install.Install(namespace=args.namespace, watch_namespaces=tuple(args.watch_namespace or ["openstack"]),
                            target_namespaces=tuple(targets), image=args.image)
    problems = setup.problems()
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    docs = ([*install.rbac(setup)] if args.part in ("all", "rbac") else []) + (
        [install.deployment(setup), install.disruption_budget(setup)] if args.part in ("all", "deployment") else [])
    sys.stdout.write(dump_all(docs))
    return 0


def run_ensure_pods(args: argparse.Namespace) -> int:
    from isthmus import registry
    from isthmus.db import make_engine

    engine = make_engine(args.db_url)
    try:
        pods = registry.Registry(engine)
        for item in args.pods:
            region, _, az = item.partition(":")
            pods.ensure_pod(region, az)
            print(f"pod {region} ({az or 'no AZ'}) registered")
    finally:
        engine.dispose()
    return 0


# What users own: a region holding any of these is not removed (ports bound there by
# the central plugin; servers and volumes, snapshots, backups placed there by the gateway).
# Isthmus' own copies (network, subnet, security group, router routings) go with the pod.
HOLDING_TYPES = ("port", "server", "volume", "snapshot", "backup")
HELD = 3  # the exit status that says "still held": the Job's pod fails and is retried


def run_remove_pod(args: argparse.Namespace) -> int:
    from isthmus import registry
    from isthmus.db import make_engine

    engine = make_engine(args.db_url)
    try:
        pods = registry.Registry(engine)
        pod = pods.find_pod(args.region)
        if pod is None or pod.is_central:
            print(f"pod {args.region}: not registered (nothing to remove)")
            return 0
        held = pods.holdings(pod.pod_id, HOLDING_TYPES)
        if held:
            what = "; ".join(f"{len(ids)} {kind}{'s' if len(ids) > 1 else ''} ({', '.join(ids[:3])}"
                             f"{', ...' if len(ids) > 3 else ''})" for kind, ids in sorted(held.items()))
            print(f"region {args.region} still holds {what}: delete them (or move them) first; "
                  "its pod stays registered", file=sys.stderr)
            return HELD
        pods.delete_pod(pod.pod_id)
        print(f"pod {args.region} removed from the registry")
    finally:
        engine.dispose()
    return 0


def run_register_endpoint(args: argparse.Namespace) -> int:
    import openstack
    from openstack.identity.v3 import _proxy as identity_v3

    conn = openstack.connect(auth_url=os.environ["OS_AUTH_URL"], username=os.environ.get("OS_USERNAME", "admin"),
                             password=os.environ["OS_PASSWORD"], project_name="admin", user_domain_name="Default",
                             project_domain_name="Default", region_name=os.environ.get("OS_REGION_NAME"),
                             # the operator mounts tls.caBundleSecretName and names it so
                             cacert=os.environ.get("OS_CACERT") or None)
    # The SDK types it as the v2 or the v3 proxy; Keystone has served only v3 for years.
    ident = cast(identity_v3.Proxy, conn.identity)
    if not ident.find_region(args.region) and not args.delete:
        ident.create_region(id=args.region)
    service = ident.find_service(args.service_name, ignore_missing=True)
    if service is None:
        if args.delete:
            return 0
        service = ident.create_service(name=args.service_name, type=args.service_type)
    for interface, url in (("public", args.public), ("internal", args.internal)):
        found = list(ident.endpoints(service_id=service.id, interface=interface, region_id=args.region))
        for extra in found[1:] if not args.delete else found:
            ident.delete_endpoint(extra)  # duplicates (or everything, when deregistering)
        if args.delete:
            continue
        if found:
            if found[0].url != url:
                ident.update_endpoint(found[0], url=url)
        else:
            ident.create_endpoint(service_id=service.id, interface=interface, url=url, region_id=args.region)
    print(f"{args.service_type} in {args.region}: {'deleted' if args.delete else 'registered'}")
    return 0
