#!/usr/bin/env python3
"""Writes the seed corpus of the checkpoint_header fuzz harness (the input layout is in
fuzz_checkpoint_header.cpp): python3 tests/fuzz/checkpoint_header_seeds.py tests/fuzz/corpus/checkpoint_header"""
import os
import struct
import sys


def field(how=0, value=b""):  # how & 7: form; how & 8: a value of the field's own follows
    return bytes([how]) + value


def i64(value):
    return field(8, struct.pack("<q", value))


def header(rows, requests, version=field(), ranks=field(), group=0):
    return bytes([rows - 1, requests - 1]) + field() + version + field() + ranks + bytes([group])


# VELOCITY: the request has a dct_momentum velocity (format 4); VELOCITY_FIELDS: has_velocity
# and the velocity dataset are in the input (else written as the writer writes them)
# STATE: the request has a state row per rank (format 5, DCT-MP), of width 2 + its byte % 4;
# STATE_FIELDS: state_words and the state dataset are in the input
DOUBLE, RESIDUAL, RAW_TAU, NAMED, VELOCITY, VELOCITY_FIELDS = 1, 2, 4, 8, 16, 32
STATE, STATE_FIELDS = 64, 128
WITHOUT_VELOCITY = 8  # checksum form bit 3: the velocity left out of the checksums (format 3's)


def request(flags, count, taus, seed=1, calls=7, name=b"", fields=None, tau_form=0,
            checksum_form=0, residual_form=0, has_velocity=field(), velocity_form=b"\0",
            state_width=0, state_words=field(), state_form=b"\0", result_nonzeros=None):
    out = bytes([flags, count]) + struct.pack("<HH", seed, calls)
    if flags & NAMED:
        out += bytes([len(name)]) + name
    if flags & STATE:
        out += bytes([state_width])
    # bit 3 of the tau form's byte: result_nonzeros (form and its bytes) follows the state
    hint = 8 if result_nonzeros is not None else 0
    out += b"".join(fields or [field()] * 9) + bytes([tau_form | hint])
    out += b"".join(struct.pack("<Q" if flags & RAW_TAU else "<H", t) for t in taus)
    out += bytes([checksum_form, residual_form])
    if flags & VELOCITY_FIELDS:  # format 4's has_velocity and velocity (form and its bytes)
        out += has_velocity + velocity_form
    if flags & STATE_FIELDS:  # format 5's state_words and state (form and its bytes)
        out += state_words + state_form
    if result_nonzeros is not None:
        out += result_nonzeros
    return out


NAN = struct.unpack("<Q", struct.pack("<d", float("nan")))[0]
seeds = {
    "valid-1rank-float": header(1, 1) + request(RESIDUAL, 16, [300]),
    "valid-1rank-double-no-residual": header(1, 1) + request(DOUBLE, 8, [0]),
    "valid-3ranks-double": header(3, 1) + request(DOUBLE | RESIDUAL, 24, [1, 2, 3], seed=9),
    "valid-3ranks-3requests": header(3, 3) + request(RESIDUAL, 5, [5, 6, 7])
    + request(DOUBLE, 64, [0, 0, 1], calls=0)
    + request(DOUBLE | RESIDUAL | NAMED, 64, [9, 8, 7], name=b"layer.weight"),
    # every integer written as an explicit value: mutations reach their high bytes
    "valid-explicit-values": header(2, 1, version=i64(2), ranks=i64(2))
    + request(RESIDUAL, 3, [4, 5], fields=[field(), i64(3), i64(4), field(), i64(7), field(),
                                           i64(1), field(), i64(1)]),
    "version1": header(1, 1, version=i64(1)) + request(RESIDUAL, 4, [1], checksum_form=3),
    "nan-tau": header(1, 1) + request(RAW_TAU | RESIDUAL, 2, [NAN]),
    "alias-link": header(2, 1, group=5) + request(RESIDUAL, 2, [1, 1]),
    # bugs the harness found (fixed): a two-element format attribute overflowed read_string's
    # value; format_version 2^32 + 2 read as 2, ranks 2^32 + 1 as 1
    "crash-two-element-format": bytes([0x8A, 0x60, 0x0E, 0x0E]),
    "bug-version-2p32": header(1, 1, version=i64(2**32 + 2)) + request(0, 0, [0]),
    "bug-ranks-2p32": header(1, 1, ranks=i64(2**32 + 1)) + request(0, 0, [0]),
    # format 4: a momentum velocity, with and without residual (density 1 with momentum)
    "valid-v4-1rank-float-velocity": header(1, 1) + request(RESIDUAL | VELOCITY, 16, [300]),
    "valid-v4-3ranks-double-velocity-no-residual": header(3, 1)
    + request(DOUBLE | VELOCITY, 24, [1, 2, 3], seed=5),
    "valid-v4-3ranks-3requests-velocity": header(3, 3)
    + request(RESIDUAL | VELOCITY, 5, [5, 6, 7])
    + request(VELOCITY, 64, [0, 0, 1], calls=0)
    + request(DOUBLE | RESIDUAL | NAMED, 64, [9, 8, 7], name=b"layer.weight"),
    # has_velocity and the velocity's form in the input, both as the writer writes them (the
    # first request's has_velocity as an explicit value): mutations reach their forms
    "valid-v4-velocity-fields": header(2, 2)
    + request(RESIDUAL | VELOCITY | VELOCITY_FIELDS, 8, [4, 5], has_velocity=i64(1))
    + request(DOUBLE | VELOCITY | VELOCITY_FIELDS, 4, [0, 1]),
    "velocity-missing": header(1, 1)
    + request(RESIDUAL | VELOCITY | VELOCITY_FIELDS, 4, [1], velocity_form=b"\1"),
    "velocity-other-shape": header(2, 1)
    + request(VELOCITY | VELOCITY_FIELDS, 4, [1, 2], velocity_form=bytes([2, 2, 5])),
    "velocity-one-dimension": header(2, 1)
    + request(DOUBLE | VELOCITY | VELOCITY_FIELDS, 4, [1, 2], velocity_form=b"\3"),
    "velocity-chunked": header(2, 1)
    + request(RESIDUAL | VELOCITY | VELOCITY_FIELDS, 9, [1, 2], velocity_form=b"\7"),
    "has-velocity-missing": header(1, 1)
    + request(RESIDUAL | VELOCITY | VELOCITY_FIELDS, 4, [1], has_velocity=field(1)),
    "has-velocity-double": header(1, 1)
    + request(VELOCITY | VELOCITY_FIELDS, 4, [1], has_velocity=field(3)),
    "has-velocity-without-velocity": header(1, 1)
    + request(RESIDUAL | VELOCITY_FIELDS, 4, [1], has_velocity=i64(1)),
    # checksums of format 3 (no velocity in them): every velocity row refused
    "velocity-checksum-v3": header(2, 1)
    + request(RESIDUAL | VELOCITY, 6, [1, 2], checksum_form=WITHOUT_VELOCITY),
    "velocity-checksum-v3-no-residual": header(2, 1)
    + request(VELOCITY, 6, [1, 2], checksum_form=WITHOUT_VELOCITY),
    # a format-3 file with a velocity: the reader reads none, so the row checksums (with the
    # velocity) do not match
    "version3-with-velocity": header(1, 1, version=i64(3)) + request(RESIDUAL | VELOCITY, 4, [1]),
    # format 5: DCT-MP requests (count 0, a state row per rank), beside an allreduce
    "valid-v5-1rank-state": header(1, 1) + request(STATE, 0, [0]),
    "valid-v5-3ranks-state-and-allreduce": header(3, 2)
    + request(STATE | DOUBLE, 0, [1, 2, 3], state_width=3)
    + request(RESIDUAL | VELOCITY, 8, [4, 5, 6]),
    "valid-v5-state-fields": header(2, 1)
    + request(STATE | STATE_FIELDS, 0, [1, 2], state_width=1, state_words=i64(3)),
    "state-missing": header(1, 1) + request(STATE | STATE_FIELDS, 0, [1], state_form=b"\1"),
    "state-other-shape": header(2, 1)
    + request(STATE | STATE_FIELDS, 0, [1, 2], state_form=bytes([2, 2, 5])),
    "state-words-without-state": header(1, 1)
    + request(STATE_FIELDS, 0, [1], state_words=i64(3)),
    "state-in-version4": header(1, 1, version=i64(4)) + request(STATE, 0, [1]),
    # result_nonzeros (what dct_algorithm=auto decides by): optional, 0 to count
    "valid-v5-result-nonzeros": header(2, 1) + request(RESIDUAL, 8, [1, 2], result_nonzeros=i64(8)),
    "result-nonzeros-missing": header(1, 1) + request(RESIDUAL, 8, [1], result_nonzeros=field(1)),
    "result-nonzeros-beyond-count": header(1, 1)
    + request(RESIDUAL, 8, [1], result_nonzeros=i64(9)),
    "result-nonzeros-negative": header(1, 1) + request(RESIDUAL, 8, [1], result_nonzeros=i64(-1)),
    "result-nonzeros-two-elements": header(1, 1)
    + request(RESIDUAL, 8, [1], result_nonzeros=field(6)),
}
os.makedirs(sys.argv[1], exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(data)
