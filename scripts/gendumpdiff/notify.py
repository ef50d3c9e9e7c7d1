#!/usr/bin/env python3
"""Writes internal/server/testdata/notify/restore.txt's commands (events
left empty): RESTORE with a list's payload DUMPed by a running
redis-server 7.0.

    redis-server --port 26799 --save "" &
    python3 scripts/gendumpdiff/notify.py 26799 > internal/server/testdata/notify/restore.txt
    go test ./internal/server -run TestKeyspaceNotificationsLikeRedis -rewrite
"""
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
r.do('FLUSHALL'); r.do('RPUSH', 'src', 'a', 'b')
p = r.do('DUMP', 'src')
w("""# Keyspace notifications of RESTORE: "restore" (class g) for a key
# restored, "new" (n) first when it did not exist or REPLACE replaced
# it; "del" when REPLACE meets a deadline already past; nothing for a
# refused RESTORE. The payload is a list DUMPed by redis-server (raw
# bytes; scripts/gendumpdiff/notify.py writes this file).
sequence
----

""")
run('RESTORE', 'k', '0', p)
run('RESTORE', 'k', '0', p)
run('RESTORE', 'k', '0', p, 'REPLACE')
run('RESTORE', 't', '100000', p)
run('RESTORE', 'k', '1', p, 'ABSTTL', 'REPLACE')
run('RESTORE', 'gone', '1', p, 'ABSTTL')
run('RESTORE', 't', '0', p[:-1], 'REPLACE')
run('CONFIG', 'SET', 'notify-keyspace-events', 'KEAn')
run('RESTORE', 'n', '0', p)
run('RESTORE', 'n', '0', p, 'REPLACE')
sys.stdout.buffer.write(bytes(out))
