#!/usr/bin/python3
"""redis-py's RedisCluster against kvorum (run by TestClusterClientRedisPy in
cluster_test.go).

Usage: redis_py_cluster.py PREFIX HOST:PORT [HOST:PORT ...]

Unchanged redis-py (Debian's python3-redis 4.3.4), seeded with every node:
RedisCluster(startup_nodes=[...]). It prints "MASTER <host:port>", the
node that serves slot 0, writes PREFIX0..PREFIX99 = v0..v99, reads them
back, and prints "OK 100"; on a failure "FAIL: ..." and exits 1.
"""

import sys

from redis.cluster import ClusterNode, RedisCluster


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    prefix = sys.argv[1]
    nodes = []
    for a in sys.argv[2:]:
        host, port = a.rsplit(":", 1)
        nodes.append(ClusterNode(host, int(port)))
    rc = RedisCluster(startup_nodes=nodes, socket_timeout=5.0, socket_connect_timeout=1.0)
    master = rc.get_node_from_key("")
    print("MASTER %s:%d" % (master.host, master.port), flush=True)
    if len(rc.get_replicas()) != len(nodes) - 1:
        fail("replicas %r, want %d" % (rc.get_replicas(), len(nodes) - 1))
    for i in range(100):
        rc.set("%s%d" % (prefix, i), "v%d" % i)
    for i in range(100):
        got = rc.get("%s%d" % (prefix, i))
        if got != ("v%d" % i).encode():
            fail("%s%d = %r" % (prefix, i, got))
    print("OK 100", flush=True)


if __name__ == "__main__":
    main()
