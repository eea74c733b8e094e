#!/usr/bin/env bash
# Build, once, the Debian 13 (trixie) root the sandbox runs OVN and Open vSwitch
# from (`isthmus sandbox up --ovn`): this machine's Debian 12 ships OVN 23.03,
# older than northd-bound remote ports (23.09) and than Neutron's tested minimum
# (24.03); trixie ships OVN 25.03 and OVS 3.5. The binaries run from the root
# with chroot and share the host's network namespaces (docs/ovn.md).
#
# Idempotent: a root that is complete (its stamp file names the packages asked
# for) is kept; a half-built one is removed and built again. Needs root and
# debootstrap (installed here when missing). About 2 minutes and 60 MB of
# downloads the first time; ~300 MB on disk.
#
# Where: $ISTHMUS_OVN_ROOT, else ${XDG_CACHE_HOME:-~/.cache}/isthmus/ovn-root
# (outside the clone: every clone and CI run on the machine shares it).
set -euo pipefail

ROOT=${ISTHMUS_OVN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/isthmus/ovn-root}
MIRROR=${ISTHMUS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
# ethtool: the userspace datapath fills no checksums, so the namespace ends of
# servers turn transmit offload off (TCP fails otherwise; ping does not care).
PACKAGES=ovn-central,ovn-host,openvswitch-switch,ethtool
STAMP="$ROOT/.isthmus-ovn-root"
WANTED="$SUITE $PACKAGES"

say() { printf '[ovn-root] %s\n' "$*"; }

if [ "$(cat "$STAMP" 2>/dev/null | head -1)" = "$WANTED" ]; then
  say "ready: $ROOT ($(sed -n 2p "$STAMP"))"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  say "building the OVN root needs root (debootstrap, chroot)"; exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

mkdir -p "$(dirname "$ROOT")"
BUILD="$ROOT.building"
rm -rf "$BUILD"
say "debootstrap $SUITE ($PACKAGES) into $BUILD; about 2 minutes"
start=$SECONDS
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$BUILD" "$MIRROR" \
  > "$(dirname "$ROOT")/ovn-root-build.log" 2>&1 || {
  say "debootstrap failed; its log: $(dirname "$ROOT")/ovn-root-build.log"; tail -5 "$(dirname "$ROOT")/ovn-root-build.log"; exit 1; }
say "debootstrap done in $((SECONDS - start)) s"
# Smaller and nothing left running: the package scripts may start daemons in
# the chroot (none should: no init there), and apt's caches are not needed.
rm -rf "$BUILD"/var/cache/apt/archives/*.deb "$BUILD"/var/lib/apt/lists/*
versions=$(chroot "$BUILD" dpkg-query -W -f='${Package} ${Version}\n' ovn-central openvswitch-switch | tr '\n' ' ')
rm -rf "$ROOT"
mv "$BUILD" "$ROOT"
printf '%s\n%s\n' "$WANTED" "$versions" > "$STAMP"
say "ready: $ROOT ($versions); $(du -sh "$ROOT" | cut -f1) on disk"
