#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_wire: a few valid frames of each shape
(layout in transport/wire/header.h and handshake.h) and some near misses."""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')


def header(mtype, flags=0, status=0, plen=0, src=0, dst=0, seq=0, ack=0, token=0, credit=0, aux=0):
    return struct.pack('<BBBBIIIQQQII', 0xF2, mtype, flags, status, plen, src, dst, seq, ack, token, credit, aux)


def handshake(nonce=False):
    hs = struct.pack('<HHHHQQII', 1, 1 if nonce else 0, 4, 0, 0x1234, 0x7, 256, 1 << 20)
    return hs + (bytes(range(16)) if nonce else b'')


def remote_buffer(addr=0x7F0000001000, rkey=0xABCD, length=4096):
    return struct.pack('<QII', addr, rkey, length)


seeds = {
    'hello': header(1, plen=32) + handshake(),
    'hello_nonce': header(1, plen=48) + handshake(True),
    'hello_ack_refused': header(2, status=17, plen=32) + handshake(),
    'heartbeat': header(3, token=5),
    'credit': header(4, credit=64, ack=10),
    'open': header(5, plen=4, src=3, token=9) + b'echo',
    'send_stream': header(8, plen=5, src=1, dst=2, seq=1) + b'hello' + header(8, src=1, dst=2, seq=2),
    'call_respbuf': header(9, flags=2, plen=20, src=1, dst=2, token=7) + remote_buffer() + b'abcd',
    'response': header(10, plen=3, dst=1, token=7) + b'xyz',
    'error': header(11, status=9, plen=4) + b'gone',
    'rendezvous': header(12, plen=16, src=1, dst=2, token=8) + remote_buffer(),
    'write_done': header(14, dst=1, token=7, aux=4096),
    'rail_keys': header(18, plen=24, seq=0, aux=2) + struct.pack('<QQII', 0x7F0000000000, 64 << 20, 0x1234, 0x5678),
    'rail_keys_bad_count': header(18, plen=24, aux=3) + struct.pack('<QQII', 0x7F0000000000, 64 << 20, 1, 2),
    'bad_magic': b'\x00' * 48,
    'truncated': header(8, plen=5, src=1, dst=2)[:30],
}

for name, data in seeds.items():
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(data)
