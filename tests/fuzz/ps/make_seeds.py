#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_ps_shard: runs of valid requests of each
op (layout in client/include/ferry/ps/wire.h) and some near misses. An
input is a caller byte, then requests as (u16 length, bytes)."""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
MAGIC, VERSION = 0x32535046, 2
PULL, PUSH, ASSIGN, SAVE = 1, 2, 3, 4


def header(op, table, count, dim, offset=0, flags=0, rid=1):
    return struct.pack('<IHBBHBBIIIII', MAGIC, VERSION, op, flags, table, 0, 0, count, dim, offset, rid, 0)


def keys(ks):
    return b''.join(struct.pack('<Q', k) for k in ks)


def floats(vs):
    return b''.join(struct.pack('<f', v) for v in vs)


def run(caller, *requests):
    return bytes([caller]) + b''.join(struct.pack('<H', len(r)) + r for r in requests)


emb_keys = [1, 2, 3, 2 ** 63 + 5]
push = header(PUSH, 0, 4, 4) + keys(emb_keys) + floats([0.5] * 16)
seeds = {
    'pull_emb': run(0, header(PULL, 0, 4, 4) + keys(emb_keys)),
    'push_then_pull': run(0, push, header(PULL, 0, 4, 4) + keys(emb_keys)),
    'assign_state': run(0, header(ASSIGN, 0, 2, 4, flags=1) + keys([7, 8]) + floats([0.25] * 8)),
    'pull_state': run(0, push, header(PULL, 0, 4, 4, flags=1) + keys(emb_keys)),
    'dense_pull': run(0, header(PULL, 1, 32, 1, offset=0)),
    'dense_push': run(0, header(PUSH, 1, 32, 1, offset=0) + floats([1.0] * 32)),
    'locked_push_allowed': run(1, header(PUSH, 2, 1, 2) + keys([4]) + floats([0.5, 0.5])),
    'locked_push_refused': run(0, header(PUSH, 2, 1, 2) + keys([4]) + floats([0.5, 0.5])),
    'nan_push': run(0, header(PUSH, 0, 1, 4) + keys([9]) + floats([float('nan')] * 4)),
    'save_steps': run(0, push, header(SAVE, 0, 2, 4, offset=0) + b'ckpt-1', header(SAVE, 0, 2, 4, offset=2) + b'ckpt-1',
                      header(SAVE, 0, 2, 4, offset=4) + b'ckpt-1'),
    'save_dense': run(0, header(SAVE, 1, 100, 1) + b'd.1'),
    'save_locked': run(1, header(SAVE, 2, 10, 2) + b'L'),
    'save_bad_name': run(0, header(SAVE, 0, 2, 4) + b'../up'),
    'save_again': run(0, header(SAVE, 0, 10, 4) + b'x', header(SAVE, 0, 10, 4) + b'x'),
    'short': run(0, b'\x46\x50\x53\x32'),
}
os.makedirs(HERE, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(data)
