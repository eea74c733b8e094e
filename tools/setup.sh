#!/usr/bin/env bash
# Install everything Isthmus and its sandbox need on a fresh Debian machine:
# OS packages (MariaDB server binaries, RabbitMQ; iproute2, ping and nftables
# for the sandbox's --dataplane), a virtualenv at .venv with the
# pinned OpenStack release (constraints.txt), and a running RabbitMQ.
# Idempotent: a second run only checks.
#
#   tools/setup.sh --ovn   also builds, once, the Debian 13 root that
#                          `isthmus sandbox up --ovn` runs OVN from (root only;
#                          tools/ovn-root.sh, docs/ovn.md)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

need_pkgs=()
command -v mariadbd >/dev/null 2>&1 || need_pkgs+=(mariadb-server)
command -v rabbitmq-server >/dev/null 2>&1 || need_pkgs+=(rabbitmq-server)
# The sandbox's --dataplane (namespaces, bridges, VXLAN, ping inside servers);
# optional: without root it cannot run anyway, so only root installs them.
dataplane_pkgs=()
command -v ip >/dev/null 2>&1 && command -v bridge >/dev/null 2>&1 || dataplane_pkgs+=(iproute2)
command -v ping >/dev/null 2>&1 || dataplane_pkgs+=(iputils-ping)
# NAT of the dataplane's routers (SNAT, floating IPs) is nftables.
command -v nft >/dev/null 2>&1 || dataplane_pkgs+=(nftables)
# Headless Chromium for the topology page's browser tests (skipped without it).
command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
  || dataplane_pkgs+=(chromium chromium-driver)
if [ ${#dataplane_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    need_pkgs+=("${dataplane_pkgs[@]}")
  else
    say "note: 'sandbox up --dataplane' and the browser tests need ${dataplane_pkgs[*]} (installed as root)"
  fi
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing OS packages: ${need_pkgs[*]}; run as root: apt-get install -y ${need_pkgs[*]}"
    exit 1
  fi
  say "installing OS packages: ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# RabbitMQ carries Nova's RPC; the sandbox makes one vhost per region on it.
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  say "starting RabbitMQ"
  rabbitmq-server -detached
  for _ in $(seq 1 60); do
    (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && break
    sleep 1
  done
fi

# The job-engine and migration tests also run on the machine's MariaDB and
# PostgreSQL (skipped, with the reason, where a server cannot be reached).
for service in mariadb:3306 postgresql:5432; do
  name=${service%%:*}; port=${service##*:}
  if ! (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && [ -x "/etc/init.d/$name" ] && [ "$(id -u)" -eq 0 ]; then
    say "starting $name"
    "/etc/init.d/$name" start >/dev/null 2>&1 || say "could not start $name; its database tests will be skipped"
  fi
done

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# What .venv was installed from: the pins, the project's requirements and where
# the checkout lives (the editable install points here). Equal: nothing to do.
wanted=$( { cat constraints.txt pyproject.toml; pwd; .venv/bin/python --version; } | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.installed 2>/dev/null)" != "$wanted" ]; then
  say "installing Python packages (pinned by constraints.txt)"
  # pip and uv are pinned too; uv installs the same pins in seconds (pip takes
  # about a minute), and pip does it where uv cannot reach an index. Bytecode is
  # compiled at install, as pip does: otherwise every service and CLI of the
  # sandbox compiles what it imports first, all at once when the sandbox starts. This
  # machine's pip config may list extra package folders that do not exist,
  # which pip reports once per package: not ours.
  pip_q() { .venv/bin/pip install -q --disable-pip-version-check -c constraints.txt "$@" \
    2> >(grep -v "^WARNING: Location 'file:" >&2); }
  pip_q pip uv
  if ! .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python -c constraints.txt \
      -e '.[sandbox,test]'; then
    say "uv could not install; pip instead"
    pip_q -e '.[sandbox,test]'
  fi
  echo "$wanted" > .venv/.installed
fi
say "ready: .venv matches constraints.txt and pyproject.toml"
if [ "${1:-}" = "--ovn" ]; then
  ./tools/ovn-root.sh
fi
