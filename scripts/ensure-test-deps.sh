#!/usr/bin/env bash
# Installs what `make test` needs besides Go, if missing:
#   redis-server, redis-cli  the differential tests compare kvorum with Redis
#   gcc, libc headers        `go test -race` needs cgo
#   python3-redis            the redis-py smoke suite (run with /usr/bin/python3)
#   etcd (etcd-server)       the etcd target of `kvorum bench kv` (its test)
# Not installed here: Docker and Compose (`docker compose` or docker-compose),
# which tests/deploy needs (it skips without them unless CI is set).
# Uses apt-get (Debian/Ubuntu), through sudo when not root. Packages are
# installed without starting their services (no redis-server left running
# on port 6379).
set -euo pipefail

pkgs=()
command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || pkgs+=(redis-tools)
command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev)
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || pkgs+=(python3 python3-redis)
[ -x /usr/bin/etcd ] || command -v etcd >/dev/null 2>&1 || pkgs+=(etcd-server)
if [ ${#pkgs[@]} -eq 0 ]; then
	exit 0
fi

echo "ensure-test-deps: missing ${pkgs[*]}; installing with apt-get" >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-test-deps: apt-get not found; please install ${pkgs[*]} with your package manager" >&2
	exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "ensure-test-deps: not root and sudo not found; please install ${pkgs[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi

# Keep package scripts from starting services: a policy-rc.d that refuses
# everything (the standard Debian mechanism), only if none exists already.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}"
