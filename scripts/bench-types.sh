#!/usr/bin/env bash
# Side-by-side benchmark of the collection types: a 3-node kvorum cluster
# (separate processes on 127.0.0.1, measured via its leader), a plain
# redis-server (persistence off) and a redis-server with appendfsync always,
# all on this machine in one run.
#
#   1. redis-benchmark -t hset,lpush,lpop,sadd,zadd,zpopmin -c 50 -n N -d 1024
#   2. LRANGE 0 99 of a 10,000-element list, ZRANGE 0 99 WITHSCORES of a
#      10,000-member sorted set (-c 50 -n N/4)
#   3. one hash of 1,000,000 fields loaded with redis-cli --pipe (HSET of 1000
#      fields per command): load time, HLEN, HGET latency, resident memory of
#      each node and the data directory size.
#
#   scripts/bench-types.sh [N]        (N default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
for c in redis-benchmark redis-server redis-cli; do
	command -v $c >/dev/null || { echo "$c not found: apt-get install redis-server redis-tools" >&2; exit 1; }
done

work=$(mktemp -d /tmp/kvorum-bench-types.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/kvorum" ./cmd/kvorum
initial="1=127.0.0.1:17411,2=127.0.0.1:17412,3=127.0.0.1:17413"
for i in 1 2 3; do
	"$work/kvorum" start --id $i --data-dir "$work/n$i" --client-addr 127.0.0.1:1641$i \
		--peer-addr 127.0.0.1:1741$i --admin-addr 127.0.0.1:1841$i --initial-cluster "$initial" \
		>"$work/n$i.log" 2>&1 &
	pids+=($!)
done
kpids=("${pids[@]}")
redis-server --port 16511 --save "" --appendonly no --daemonize no >"$work/redis-plain.log" 2>&1 &
pids+=($!)
redis-server --port 16512 --save "" --appendonly yes --appendfsync always --dir "$work" --daemonize no >"$work/redis-aof.log" 2>&1 &
pids+=($!)

leader=""
for _ in $(seq 1 100); do
	for i in 1 2 3; do
		st=$(curl -fsS "http://127.0.0.1:1841$i/v1/status" 2>/dev/null || true)
		if echo "$st" | grep -Eq '"role": *"leader"'; then leader=$i; fi
	done
	[ -n "$leader" ] && break
	sleep 0.2
done
[ -n "$leader" ] || { echo "no kvorum leader" >&2; tail "$work"/n*.log >&2; exit 1; }
echo "# kvorum leader: node $leader (port 1641$leader)"
echo "# $(date -u +%FT%TZ) $(nproc) cores; redis $(redis-server --version | awk '{print $3}')"

targets=("kvorum-leader:1641$leader" "redis-plain:16511" "redis-aof-always:16512")
run() { # name port args...
	local name=$1 port=$2
	shift 2
	redis-benchmark -p "$port" -q --csv "$@" 2>&1 | grep -v -e "^\"test\"" -e "Could not fetch server CONFIG" | sed "s/^/$name,/"
}

echo "## -t hset,lpush,lpop,sadd,zadd,zpopmin -c 50 -n $N -d 1024"
echo "target,test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
for t in "${targets[@]}"; do
	run "${t%%:*}" "${t##*:}" -t hset,lpush,lpop,sadd,zadd,zpopmin -c 50 -n "$N" -d 1024
done

echo "## reading 100 elements of a 10,000-element list / sorted set (-c 50 -n $((N / 4)))"
gen_fill() { # 10,000 RPUSH and ZADD elements, 100 per command
	python3 - <<'EOF'
import sys
out = sys.stdout.buffer
def cmd(*a):
    out.write(b"*%d\r\n" % len(a))
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
cmd("DEL", "biglist", "bigz")
for b in range(100):
    cmd("RPUSH", "biglist", *["element-%05d" % (b * 100 + i) for i in range(100)])
    z = []
    for i in range(100):
        n = b * 100 + i
        z += [n * 1.5, "member-%05d" % n]
    cmd("ZADD", "bigz", *z)
EOF
}
echo "target,test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
for t in "${targets[@]}"; do
	gen_fill | redis-cli -p "${t##*:}" --pipe >/dev/null
	run "${t%%:*}" "${t##*:}" -c 50 -n $((N / 4)) LRANGE biglist 0 99
	run "${t%%:*}" "${t##*:}" -c 50 -n $((N / 4)) ZRANGE bigz 0 99 WITHSCORES
done

echo "## one hash of 1,000,000 fields"
gen_big() {
	python3 - <<'EOF'
import sys
out = sys.stdout.buffer
for b in range(1000):
    args = [b"HSET", b"bighash"]
    for i in range(1000):
        n = b * 1000 + i
        args += [b"field:%07d" % n, b"value-%07d-................................" % n]
    out.write(b"*%d\r\n" % len(args))
    for x in args:
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
EOF
}
for t in "${targets[@]}"; do
	name=${t%%:*} port=${t##*:}
	start=$(date +%s.%N)
	gen_big | redis-cli -p "$port" --pipe >/dev/null
	end=$(date +%s.%N)
	printf '%s: loaded in %.1f s, HLEN %s\n' "$name" "$(awk "BEGIN{print $end - $start}")" "$(redis-cli -p "$port" hlen bighash)"
	run "$name" "$port" -c 50 -n $((N / 4)) HGET bighash field:0500000
done
sleep 2
for i in 1 2 3; do
	echo "kvorum node $i: RSS $(awk '/VmRSS/{print $2, $3}' /proc/${kpids[$((i-1))]}/status), data dir $(du -sh "$work/n$i" | cut -f1)"
done
echo "redis-plain RSS: $(awk '/VmRSS/{print $2, $3}' /proc/${pids[3]}/status)"
echo "redis-aof-always RSS: $(awk '/VmRSS/{print $2, $3}' /proc/${pids[4]}/status)"
echo "## DEL of the 1,000,000-field hash"
for t in "${targets[@]}"; do
	name=${t%%:*} port=${t##*:}
	start=$(date +%s.%N)
	redis-cli -p "$port" del bighash >/dev/null
	end=$(date +%s.%N)
	printf '%s: DEL took %.1f ms\n' "$name" "$(awk "BEGIN{print ($end - $start) * 1000}")"
done
