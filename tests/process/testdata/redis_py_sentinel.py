#!/usr/bin/python3
"""redis-py's Sentinel client against kvorum (run by TestSentinelFailoverRedisPy
in sentinel_test.go).

Usage: redis_py_sentinel.py MASTER-NAME HOST:PORT [HOST:PORT ...]

The kvorum nodes' client addresses are given as the sentinels, unchanged
redis-py (Debian's python3-redis 4.3.4): Sentinel([...]).master_for(name).
It writes keys py-0, py-1, ... through the master, prints
"READY-FOR-KILL <addr>" (the master's address) after the first 30 and
waits for "KILLED" on stdin, then writes 70 more, retrying a failed write
(at most 100 times, 0.1 s apart, each key; 60 s for the whole run). It
checks that the master it ends on is another node, then prints one line
"ACKED <json list of the keys acknowledged>" and exits 0; on a failure
"FAIL: ..." and exits 1.
"""

import json
import sys
import time

from redis.exceptions import ConnectionError, ResponseError, TimeoutError
from redis.sentinel import Sentinel


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    name = sys.argv[1]
    addrs = []
    for a in sys.argv[2:]:
        host, port = a.rsplit(":", 1)
        addrs.append((host, int(port)))
    sentinel = Sentinel(addrs, socket_timeout=2.0, socket_connect_timeout=1.0)
    first = sentinel.discover_master(name)
    master = sentinel.master_for(name, socket_timeout=5.0, socket_connect_timeout=1.0)
    role = master.execute_command("ROLE")
    if not role or role[0] not in (b"master", "master"):
        fail("ROLE of the master %s: %r" % (first, role))
    if len(sentinel.discover_slaves(name)) != len(addrs) - 1:
        fail("replicas %r, want %d" % (sentinel.discover_slaves(name), len(addrs) - 1))

    acked = []
    deadline = time.time() + 60
    errors = 0
    for i in range(100):
        if i == 30:
            print("READY-FOR-KILL %s:%d" % first, flush=True)
            if sys.stdin.readline().strip() != "KILLED":
                fail("the driver did not kill the master")
        key, val = "py-%d" % i, "v%d" % i
        for attempt in range(100):
            if time.time() > deadline:
                fail("60 s passed; %d keys acknowledged, %d errors" % (len(acked), errors))
            try:
                if master.set(key, val):
                    acked.append(key)
                    break
            except (ConnectionError, TimeoutError, ResponseError) as e:
                # ConnectionError includes MasterNotFoundError (no sentinel
                # names a reachable master yet); CLUSTERDOWN is a ResponseError.
                errors += 1
                time.sleep(0.1)
        else:
            fail("%s not written after 100 attempts" % key)
    now = sentinel.discover_master(name)
    if now == first:
        fail("the master is still %s after it was killed" % (first,))
    print("errors %d, master %s -> %s" % (errors, first, now), flush=True)
    print("ACKED " + json.dumps(acked), flush=True)


if __name__ == "__main__":
    main()
