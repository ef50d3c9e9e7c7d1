#!/usr/bin/env bash
# idle-ranges.sh: what an idle node costs with many ranges (issue 18's
# "a node with 1,000 ranges idles at under 5 % of one core").
#
# Starts two 3-node clusters of `kvorum start` processes on 127.0.0.1 side by
# side: one left at one range, one split by hand (`kvorum ctl range split`,
# several splits at once) into RANGES ranges. Once every replica of the many-
# range cluster is quiesced (or after a wait), it samples the CPU time of
# every node of both clusters from /proc/PID/stat over SECONDS and prints
# each node's share of one core, with the quiesced and awake range counts
# from /metrics and its resident memory.
#
#   scripts/idle-ranges.sh [RANGES] [SECONDS]     (defaults 1000 and 30)
#
# Ports: BASE (default 29300) .. BASE+2 clients, +100 peers, +200 admin for
# the many-range cluster; BASE+10.. for the one-range cluster. Data in a
# temporary directory removed on exit. Stops only the processes it started.
set -euo pipefail

RANGES=${1:-1000}
SECONDS_IDLE=${2:-30}
BASE=${BASE:-29300}
PAR=${PAR:-8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d /tmp/kvorum-idle.XXXXXX)
BIN=$DIR/kvorum
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

echo "building kvorum" >&2
(cd "$ROOT" && go build -o "$BIN" ./cmd/kvorum)

# up NAME BASE: a 3-node cluster; prints the PIDs.
up() {
	local name=$1 base=$2 init="" i
	for i in 1 2 3; do init+="${init:+,}$i=127.0.0.1:$((base + 100 + i - 1))"; done
	for i in 1 2 3; do
		"$BIN" start --id "$i" --data-dir "$DIR/$name-$i" --initial-cluster "$init" \
			--client-addr "127.0.0.1:$((base + i - 1))" --peer-addr "127.0.0.1:$((base + 100 + i - 1))" \
			--admin-addr "127.0.0.1:$((base + 200 + i - 1))" --log-level warn \
			>"$DIR/$name-$i.log" 2>&1 &
		PIDS+=($!)
		echo "$!" >"$DIR/$name-$i.pid"
	done
	for _ in $(seq 100); do
		"$BIN" ctl --addr "127.0.0.1:$((base + 200))" health >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	echo "cluster $name did not become ready; logs in $DIR" >&2
	tail -5 "$DIR/$name-1.log" >&2
	exit 1
}

ctl() { "$BIN" ctl --addr "127.0.0.1:$((BASE + 200))" "$@"; }

# ranges_json: "id start end" per range, from node 1.
ranges_now() {
	ctl --json range list | python3 -c '
import json, sys
for r in json.load(sys.stdin)["ranges"]:
    print(r["range_id"], r.get("start_slot", 0), r["end_slot"])'
}

up many "$BASE"
up one "$((BASE + 10))"

echo "splitting into $RANGES ranges ($PAR splits at a time)" >&2
start=$(date +%s)
while :; do
	mapfile -t rows < <(ranges_now)
	have=${#rows[@]}
	echo "  $have ranges after $(($(date +%s) - start)) s" >&2
	((have >= RANGES)) && break
	want=$((RANGES - have))
	# Halve the widest ranges first: every round splits up to `want`
	# ranges, each at its middle slot, PAR at a time.
	printf '%s\n' "${rows[@]}" | awk '$3-$2 >= 2 {print $3-$2, $1, int(($2+$3)/2)}' |
		sort -rn | head -n "$want" | awk '{print $2, $3}' |
		xargs -P "$PAR" -n 2 sh -c '"$0" ctl --addr "$1" range split "$2" "$3" >/dev/null 2>&1 || true' "$BIN" "127.0.0.1:$((BASE + 200))"
done
echo "split into $have ranges in $(($(date +%s) - start)) s" >&2

metric() { # node-admin-port name
	curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}
echo "waiting for the ranges to quiesce (up to 60 s)" >&2
for _ in $(seq 60); do
	awake=0
	for i in 1 2 3; do
		a=$(metric $((BASE + 200 + i - 1)) kvorum_raft_ranges_awake)
		awake=$((awake + ${a%.*}))
	done
	((awake <= 3)) && break
	sleep 1
done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A t0
for name in many one; do for i in 1 2 3; do
	p=$(cat "$DIR/$name-$i.pid")
	t0[$name-$i]=$(ticks "$p")
done; done
echo "sampling CPU for $SECONDS_IDLE s" >&2
sleep "$SECONDS_IDLE"
printf '%-28s %6s %10s %8s %8s %9s\n' cluster node "cpu %core" quiesced awake "rss MiB"
for name in many one; do
	b=$BASE
	[[ $name == one ]] && b=$((BASE + 10))
	for i in 1 2 3; do
		p=$(cat "$DIR/$name-$i.pid")
		t1=$(ticks "$p")
		pct=$(awk -v a="${t0[$name-$i]}" -v b="$t1" -v hz="$hz" -v s="$SECONDS_IDLE" 'BEGIN {printf "%.2f", 100 * (b - a) / hz / s}')
		q=$(metric $((b + 200 + i - 1)) kvorum_raft_ranges_quiesced)
		a=$(metric $((b + 200 + i - 1)) kvorum_raft_ranges_awake)
		rss=$(awk '$1 == "VmRSS:" {printf "%.0f", $2 / 1024}' "/proc/$p/status")
		label="$([[ $name == many ]] && echo "$have ranges" || echo "1 range")"
		printf '%-28s %6s %10s %8s %8s %9s\n' "$label" "$i" "$pct" "${q%.*}" "${a%.*}" "$rss"
	done
done
