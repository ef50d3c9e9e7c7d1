#!/usr/bin/env bash
# Side-by-side benchmark: a 3-node kvorum cluster (separate processes on
# 127.0.0.1) via its leader and via a follower, a plain redis-server
# (persistence off) and a redis-server with appendfsync always, all on this
# machine in one run. Prints redis-benchmark CSV lines and the resident
# memory of each kvorum node after loading 100,000 keys of 1 KiB.
#
#   scripts/bench.sh [N] [extra redis-benchmark args]     (N default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
shift || true
EXTRA=("$@")
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found: apt-get install redis-tools" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server not found: apt-get install redis-server" >&2; exit 1; }

work=$(mktemp -d /tmp/kvorum-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/kvorum" ./cmd/kvorum
initial="1=127.0.0.1:17401,2=127.0.0.1:17402,3=127.0.0.1:17403"
for i in 1 2 3; do
	"$work/kvorum" start --id $i --data-dir "$work/n$i" --client-addr 127.0.0.1:1640$i \
		--peer-addr 127.0.0.1:1740$i --admin-addr 127.0.0.1:1840$i --initial-cluster "$initial" \
		>"$work/n$i.log" 2>&1 &
	pids+=($!)
done
kpids=("${pids[@]}")
redis-server --port 16501 --save "" --appendonly no --daemonize no >"$work/redis-plain.log" 2>&1 &
pids+=($!)
redis-server --port 16502 --save "" --appendonly yes --appendfsync always --dir "$work" --daemonize no >"$work/redis-aof.log" 2>&1 &
pids+=($!)

leader=""
for _ in $(seq 1 100); do
	for i in 1 2 3; do
		st=$(curl -fsS "http://127.0.0.1:1840$i/v1/status" 2>/dev/null || true)
		if echo "$st" | grep -Eq '"role": *"leader"'; then leader=$i; fi
	done
	[ -n "$leader" ] && break
	sleep 0.2
done
[ -n "$leader" ] || { echo "no kvorum leader" >&2; tail "$work"/n*.log >&2; exit 1; }
follower=$(( leader % 3 + 1 ))
echo "# kvorum leader: node $leader (port 1640$leader); follower: node $follower (port 1640$follower)"
echo "# $(date -u +%FT%TZ) $(nproc) cores; redis $(redis-server --version | awk '{print $3}')"

run() { # name port args...
	local name=$1 port=$2
	shift 2
	redis-benchmark -p "$port" -q --csv "$@" "${EXTRA[@]}" | sed "s/^/$name,/"
}
for P in 1 16; do
	echo "## -t set,get -c 50 -n $N -d 1024 -P $P"
	echo "target,test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
	run kvorum-leader 1640$leader -t set,get -c 50 -n "$N" -d 1024 -P $P | grep -v '^[a-z-]*,"test"'
	run kvorum-follower 1640$follower -t set,get -c 50 -n "$N" -d 1024 -P $P | grep -v '^[a-z-]*,"test"'
	run redis-plain 16501 -t set,get -c 50 -n "$N" -d 1024 -P $P | grep -v '^[a-z-]*,"test"'
	run redis-aof-always 16502 -t set,get -c 50 -n "$N" -d 1024 -P $P | grep -v '^[a-z-]*,"test"'
done

echo "## resident memory after loading 100000 keys of 1 KiB (FLUSHALL first)"
redis-cli -p 1640$leader flushall >/dev/null
redis-benchmark -p 1640$leader -q -t set -n 100000 -r 100000000000 -d 1024 -c 50 -P 16 >/dev/null
sleep 2
echo "dbsize: $(redis-cli -p 1640$follower dbsize)"
for i in 1 2 3; do
	echo "kvorum node $i RSS: $(awk '/VmRSS/{print $2, $3}' /proc/${kpids[$((i-1))]}/status)"
done
redis-cli -p 16501 flushall >/dev/null
redis-benchmark -p 16501 -q -t set -n 100000 -r 100000000000 -d 1024 -c 50 -P 16 >/dev/null
echo "redis-plain RSS: $(awk '/VmRSS/{print $2, $3}' /proc/${pids[3]}/status) (dbsize $(redis-cli -p 16501 dbsize))"
