#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_handshake (input layout in
fuzz_handshake.cpp): a role/secret-length byte, the secret, then a
Hello/HelloAck payload (layout in transport/wire/handshake.h) in each of
its three forms, some with a proof that is valid for the fuzzer's
transcript, and a few near misses."""
import hashlib
import hmac
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
SECRET = b'0123456789abcdef-seed'  # 21 bytes: length byte 21 - 16 = 5


def handshake(flags, epoch=0x1234, nonce=bytes(range(16)), proof=b''):
    hs = struct.pack('<HHHHQQII', 1, flags, 2, 0, epoch, 0x13, 256, 1 << 20)
    if flags & 1:
        hs += nonce
    if flags & 2:
        hs += proof
    return hs


def proof(role, nonce, epoch):
    # Same transcript as fuzz_proof(): acceptor nonce 0x5A ^ i, acceptor epoch ~epoch.
    label = (b'ferry-auth-v1 initiator' if role == 'i' else b'ferry-auth-v1 acceptor').ljust(24, b'\0')
    na = bytes(0x5A ^ i for i in range(16))
    msg = label + nonce + na + struct.pack('<QQ', epoch, ~epoch & (2**64 - 1))
    return hmac.new(SECRET, msg, hashlib.sha256).digest()


def prefix(role):
    return bytes([(0x80 if role == 'i' else 0) | (len(SECRET) - 16)]) + SECRET


nonce = bytes(range(16))
seeds = {
    'base': prefix('a') + handshake(0),
    'nonce': prefix('a') + handshake(1),
    'proof_valid_acceptor': prefix('a') + handshake(3, proof=proof('a', nonce, 0x1234)),
    'proof_valid_initiator': prefix('i') + handshake(3, proof=proof('i', nonce, 0x1234)),
    'proof_wrong': prefix('a') + handshake(3, proof=bytes(32)),
    'proof_without_nonce': prefix('a') + handshake(2, proof=bytes(32)),
    'short': prefix('a') + handshake(1)[:40],
}

os.makedirs(HERE, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(data)
