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

    pods = tools.add_parser("ensure-pods", help="(Job) register regions as pods in the Isthmus registry")
    pods.add_argument("--db-url", required=True)
    pods.add_argument("pods", nargs="+", metavar="REGION:AZ")
    pods.set_defaults(func=run_ensure_pods)

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

    from isthmus.operator.render import render_documents
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


def run_register_endpoint(args: argparse.Namespace) -> int:
    import openstack
    from openstack.identity.v3 import _proxy as identity_v3

    conn = openstack.connect(auth_url=os.environ["OS_AUTH_URL"], username=os.environ.get("OS_USERNAME", "admin"),
                             password=os.environ["OS_PASSWORD"], project_name="admin", user_domain_name="Default",
                             project_domain_name="Default", region_name=os.environ.get("OS_REGION_NAME"))
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
