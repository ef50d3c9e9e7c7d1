"""A minimal RESP2 client, Redis's CRC64 (Jones) and the quoting of the
differential files (kvdiff.SplitArgs), for dump.py and notify.py."""
import socket
class R:
    def __init__(s, port):
        s.s = socket.create_connection(("127.0.0.1", port)); s.f = s.s.makefile('rb')
    def do(s, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            if isinstance(a, str): a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.s.sendall(out); return s.read()
    def read(s):
        l = s.f.readline()[:-2]; t, r = l[:1], l[1:]
        if t == b'+': return r.decode()
        if t == b'-': return Exception(r.decode())
        if t == b':': return int(r)
        if t == b'$':
            n = int(r)
            if n < 0: return None
            d = s.f.read(n + 2)[:-2]; return d
        if t == b'*':
            n = int(r)
            if n < 0: return None
            return [s.read() for _ in range(n)]
        raise Exception("bad " + repr(l))

def crc64(data):
    poly = 0x95ac9329ac4bc9b5
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc

def quote(b):
    out = bytearray(b'"')
    for c in b:
        ch = bytes([c])
        if ch == b'\\': out += b'\\\\'
        elif ch == b'"': out += b'\\"'
        elif ch == b'\n': out += b'\\n'
        elif ch == b'\r': out += b'\\r'
        elif ch == b'\t': out += b'\\t'
        elif ch == b'\0': out += b'\\0'
        else: out += ch
    out += b'"'
    return bytes(out)
