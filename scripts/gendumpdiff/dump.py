#!/usr/bin/env python3
"""Writes internal/kv/testdata/diff/dump.txt's commands (replies left
empty): DUMP of keys whose payload Redis fixes, and RESTORE of payload
literals DUMPed by a running redis-server 7.0 (raw bytes: the file format
has no \\x escape), then their read-back; RESTORE's options and errors.

    redis-server --port 26799 --save "" &
    python3 scripts/gendumpdiff/dump.py 26799 > internal/kv/testdata/diff/dump.txt
    go test ./internal/kv -run TestDifferentialKV/dump.txt -rewrite

(the last step records redis-server's replies)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import *
r = R(int(sys.argv[1]))
out = bytearray()
def w(s):
    global out
    out += s if isinstance(s, bytes) else s.encode()
def arg(a):
    if isinstance(a, str): a = a.encode()
    if a == b'' or any(c in a for c in b' \t"\\\n\r\0') or any(c >= 0x80 or c < 0x20 for c in a):
        return quote(a)
    return a
def run(*args):
    w("run\n"); w(b" ".join(arg(a) for a in args)); w("\n----\n\n")
def seq(comment):
    w("# " + comment.replace("\n", "\n# ") + "\nsequence\n----\n\n")
def payload(setup, key):
    r.do('FLUSHALL')
    for c in setup:
        res = r.do(*c)
        assert not isinstance(res, Exception), (c, res)
    p = r.do('DUMP', key)
    assert isinstance(p, bytes), p
    return p
def fix(body):
    return body + crc64(body).to_bytes(8, 'little')

w("""# DUMP and RESTORE (Redis 7.0's payload: the RDB object, the RDB version
# (10) and a CRC64). DUMP replies are byte for byte Redis's where its
# encoding is deterministic (strings, lists, intsets, listpack hashes with
# fields inserted in byte order, listpack and skiplist sorted sets, streams
# whose groups have no consumers); other payloads (hashtable sets and hashes,
# whose order depends on the process's hash seed, and streams with pending
# entries, whose times are the clock's) are literals DUMPed by redis-server
# 7.0.15, RESTOREd here and read back with commands. The literals hold raw
# bytes (the file format has no \\x escape).
# Written by scripts/gendumpdiff/dump.py, replies recorded with -rewrite;
# internal/server's TestDumpRestoreWithRedis moves keys both ways live.

""")

def roundtrip(comment, setup, key, reads, enc=True, exact=True):
    seq(comment)
    for c in setup:
        run(*c)
    if exact:
        run('DUMP', key)
    p = payload(setup, key)
    run('RESTORE', key + '2', '0', p)
    for rd in reads:
        run(*[a.replace('$', key + '2') for a in rd])
    if enc:
        run('OBJECT', 'ENCODING', key + '2')
    run('TTL', key + '2')

roundtrip("strings: short, integer, long (LZF-compressed), binary", [('SET', 's', 'hello')], 's', [('GET', '$')])
roundtrip("an integer string", [('SET', 'i', '-12345')], 'i', [('GET', '$')])
roundtrip("a large integer", [('SET', 'i', '9223372036854775807')], 'i', [('GET', '$')])
roundtrip("a string LZF compresses", [('SET', 'c', 'a' * 100 + 'b' * 50)], 'c', [('GET', '$'), ('STRLEN', '$')])
roundtrip("a string LZF cannot shorten", [('SET', 'c', 'abcdefghijklmnopqrstuvwxyz0123456789')], 'c', [('GET', '$')])
roundtrip("binary", [('SET', 'b', bytes(range(256)))], 'b', [('STRLEN', '$'), ('GETRANGE', '$', '0', '15')])
roundtrip("HyperLogLog (a string)", [('PFADD', 'h', 'a', 'b', 'c')], 'h', [('PFCOUNT', '$')], enc=False)
roundtrip("bitmap (a string)", [('SETBIT', 'bm', '100', '1'), ('SETBIT', 'bm', '3', '1')], 'bm', [('BITCOUNT', '$'), ('GETBIT', '$', '100')])
roundtrip("a small list", [('RPUSH', 'l', 'a', 'b', '1', '-2', '300', '70000', 'x' * 70)], 'l', [('LRANGE', '$', '0', '-1')])
roundtrip("a list of several quicklist nodes", [tuple(['RPUSH', 'l'] + [str(i) * 3 for i in range(3000)])], 'l', [('LLEN', '$'), ('LRANGE', '$', '0', '4'), ('LRANGE', '$', '-3', '-1')])
roundtrip("an intset", [('SADD', 's', '3', '1', '-2', '1000', '70000', '5000000000')], 's', [('SMEMBERS', '$')])
roundtrip("a set of strings (hashtable: a literal)", [('SADD', 's', 'x', 'y', 'z', '1')], 's', [('SMEMBERS', '$')], exact=False)
roundtrip("a big intset becomes a hashtable", [tuple(['SADD', 's'] + [str(i) for i in range(600)])], 's', [('SCARD', '$'), ('SISMEMBER', '$', '599')], exact=False)
roundtrip("a listpack hash (fields inserted in byte order)", [('HSET', 'h', 'a', '1', 'b', 'two', 'c', '-3')], 'h', [('HGETALL', '$')])
roundtrip("a hashtable hash (long value: a literal)", [('HSET', 'h', 'a', '1', 'b', 'v' * 100)], 'h', [('HGETALL', '$')], exact=False)
roundtrip("a big hash (a literal)", [tuple(['HSET', 'h'] + [x for i in range(600) for x in ('f%03d' % i, str(i))])], 'h', [('HLEN', '$'), ('HGET', '$', 'f599')], exact=False)
roundtrip("a hash that grew to a hashtable and shrank keeps its encoding: DUMP\nwrites it so; RESTORE picks by size", [('HSET', 'h', 'a', '1', 'b', 'v' * 100), ('HDEL', 'h', 'b'), ('OBJECT', 'ENCODING', 'h')], 'h', [('HGETALL', '$')])
roundtrip("likewise a set", [('SADD', 's', '1', 'x'), ('SREM', 's', 'x'), ('OBJECT', 'ENCODING', 's')], 's', [('SMEMBERS', '$')])
roundtrip("likewise a sorted set", [('ZADD', 'z', '1', 'a', '2', 'm' * 70), ('ZREM', 'z', 'm' * 70), ('OBJECT', 'ENCODING', 'z')], 'z', [('ZRANGE', '$', '0', '-1', 'WITHSCORES')])
roundtrip("a listpack sorted set", [('ZADD', 'z', '1', 'a', '2.5', 'b', '-3', 'c', '1e20', 'd', 'inf', 'e')], 'z', [('ZRANGE', '$', '0', '-1', 'WITHSCORES')])
roundtrip("a skiplist sorted set", [tuple(['ZADD', 'z'] + [x for i in range(130) for x in (str(i % 10) + '.5', 'm%03d' % i)])], 'z', [('ZCARD', '$'), ('ZRANGE', '$', '0', '3', 'WITHSCORES'), ('ZSCORE', '$', 'm129')])
roundtrip("a sorted set with a long member (skiplist)", [('ZADD', 'z', '1', 'm' * 70, '2', 'b')], 'z', [('ZRANGE', '$', '0', '-1', 'WITHSCORES')])
roundtrip("a stream with a group without consumers",
    [('XADD', 'x', '1-1', 'a', '1'), ('XADD', 'x', '2-1', 'a', '2', 'b', '3'), ('XADD', 'x', '3-0', 'c', '4'), ('XGROUP', 'CREATE', 'x', 'g', '1-1', 'ENTRIESREAD', '1')],
    'x', [('XINFO', 'STREAM', '$', 'FULL'), ('XRANGE', '$', '-', '+')], enc=False)
roundtrip("a stream with a deleted entry (a literal: Redis's node keeps the\ndeleted entry, flagged, kvorum keeps only the live ones)",
    [('XADD', 'x', '1-1', 'a', '1'), ('XADD', 'x', '2-1', 'a', '2', 'b', '3'), ('XADD', 'x', '3-0', 'c', '4'), ('XDEL', 'x', '2-1'), ('XGROUP', 'CREATE', 'x', 'g', '1-1', 'ENTRIESREAD', '1')],
    'x', [('XINFO', 'STREAM', '$', 'FULL'), ('XRANGE', '$', '-', '+')], enc=False, exact=False)
roundtrip("an empty stream (XADD then XDEL) with a group",
    [('XADD', 'x', '5-5', 'a', '1'), ('XDEL', 'x', '5-5'), ('XGROUP', 'CREATE', 'x', 'g', '$')],
    'x', [('XINFO', 'STREAM', '$', 'FULL')], enc=False)
roundtrip("a stream with pending entries and consumers (a literal: its times are the clock's)",
    [('XADD', 'x', '1-1', 'a', '1'), ('XADD', 'x', '2-1', 'b', '2'), ('XADD', 'x', '3-1', 'c', '3'),
     ('XGROUP', 'CREATE', 'x', 'g1', '0'), ('XGROUP', 'CREATE', 'x', 'g2', '$'),
     ('XREADGROUP', 'GROUP', 'g1', 'alice', 'COUNT', '2', 'STREAMS', 'x', '>'),
     ('XREADGROUP', 'GROUP', 'g1', 'bob', 'STREAMS', 'x', '>'),
     ('XACK', 'x', 'g1', '2-1'), ('XGROUP', 'CREATECONSUMER', 'x', 'g2', 'carol')],
    'x', [('XINFO', 'STREAM', '$', 'FULL'), ('XPENDING', '$', 'g1'), ('XINFO', 'GROUPS', '$')], enc=False, exact=False)

# TTLs and options
p = payload([('SET', 'src', 'v')], 'src')
seq("TTL: relative, absolute (ABSTTL), 0 none, past deadline: OK and no key")
run('RESTORE', 'k', '100000', p); run('TTL', 'k'); run('GET', 'k')
run('RESTORE', 'a', '4102444800000', p, 'ABSTTL'); run('PEXPIRETIME', 'a')
run('RESTORE', 'n', '0', p, 'ABSTTL'); run('TTL', 'n')
run('RESTORE', 'past', '1', p, 'ABSTTL'); run('EXISTS', 'past')
run('SET', 'old', 'x'); run('RESTORE', 'old', '1', p, 'ABSTTL', 'REPLACE'); run('EXISTS', 'old')
run('RESTORE', 'o', '0', p, 'IDLETIME', '100'); run('RESTORE', 'o2', '0', p, 'FREQ', '5', 'ABSTTL'); run('RESTORE', 'o3', '0', p, 'idletime', '1', 'idletime', '2', 'replace')
run('GET', 'o3')

seq("REPLACE and BUSYKEY")
run('RPUSH', 'k', 'a')
run('RESTORE', 'k', '0', p)
run('RESTORE', 'k', 'notanumber', 'junk')
run('RESTORE', 'k', '0', p, 'REPLACE')
run('TYPE', 'k'); run('GET', 'k')
run('DUMP', 'nosuchkey')

seq("errors, in Redis's order")
for a in [('DUMP',), ('DUMP', 'a', 'b'), ('RESTORE', 'k', '0'),
          ('RESTORE', 'k', '0', p, 'NOPE'), ('RESTORE', 'k', '0', p, 'IDLETIME'), ('RESTORE', 'k', '0', p, 'FREQ'),
          ('RESTORE', 'k', '0', p, 'IDLETIME', '1', 'FREQ', '1'), ('RESTORE', 'k', '0', p, 'FREQ', '1', 'IDLETIME', '1'),
          ('RESTORE', 'k', '0', p, 'IDLETIME', 'x'), ('RESTORE', 'k', '0', p, 'IDLETIME', '-1'),
          ('RESTORE', 'k', '0', p, 'FREQ', '256'), ('RESTORE', 'k', '0', p, 'FREQ', '-1'), ('RESTORE', 'k', '0', p, 'FREQ', 'x'),
          ('RESTORE', 'k', 'x', p), ('RESTORE', 'k', '-1', p), ('RESTORE', 'k', '1.5', p),
          ('RESTORE', 'k', '0', 'junk'), ('RESTORE', 'k', '0', ''), ('RESTORE', 'k', '0', p[:-1]),
          ('RESTORE', 'k', '0', p[:3] + bytes([p[3] ^ 1]) + p[4:]),
          ('RESTORE', 'k', '0', fix(p[:-10] + b'\x0d\x00')),  # RDB version 13
          ('RESTORE', 'k', '0', fix(b'\x00\x3fab\x0a\x00')),  # a string longer than the payload, right checksum
          ('RESTORE', 'k', '0', fix(b'\x02\x00\x0a\x00')),    # an empty set
          ('RESTORE', 'k', '0', fix(b'\x63\x00\x0a\x00')),    # unknown type 99
          ('EXISTS', 'k')]:
    run(*a)
sys.stdout.buffer.write(bytes(out))
