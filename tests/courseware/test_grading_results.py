"""The grader's reader of the probe's frames (courseware.grading.results.FrameReader) stops at every cap.

The probe's pipes are closed to a submission, so a bad frame can only come from a broken probe;
these tests feed the reader bytes directly and check that every path that stops it says why,
reads no further than its caps, and keeps the frames it had already read.
"""
import io
import json

import pytest

from courseware.grading.results import MAX_HEADER_BYTES, FrameReader

FILE_BYTES, TOTAL_BYTES = 1_000, 2_500


def frame(exercise: str, record: bytes, blob: bytes) -> bytes:
    header = {"id": exercise, "ended": True, "json": len(record), "bin": len(blob), "problem": ""}
    return json.dumps(header).encode() + b"\n" + record + blob


def read(stream: bytes) -> FrameReader:
    reader = FrameReader(io.BytesIO(stream), FILE_BYTES, TOTAL_BYTES)
    reader.run()  # in this thread: the stream is finite
    return reader


def test_well_formed_frames_are_read_in_full():
    reader = read(b'{"ready": true}\n' + frame("ex-a", b"{}", b"x" * 10) + frame("ex-b", b"[]", b""))
    assert reader.ready and reader.failure == ""
    assert reader.frames["ex-a"][1:] == (b"{}", b"x" * 10) and reader.frames["ex-b"][1:] == (b"[]", b"")


def test_results_beyond_the_total_cap_stop_the_reader_and_say_so():
    blob = b"y" * FILE_BYTES
    reader = read(frame("ex-a", b"{}", blob) + frame("ex-b", b"{}", blob) + frame("ex-c", b"{}", blob))
    assert set(reader.frames) == {"ex-a", "ex-b"}  # 2 × 1,002 bytes fit in 2,500; the third does not
    assert reader.failure == "the results exceed the 2,500 bytes the grader reads for one submission"


@pytest.mark.parametrize("header", [
    b"not json at all",
    b'{"id": "ex-a"}',  # fields missing
    b'{"id": 7, "ended": true, "json": 2, "bin": 0, "problem": ""}',  # id not a string
    b'{"id": "ex-a", "ended": true, "json": true, "bin": 0, "problem": ""}',  # a bool is not a size
    b'{"id": "ex-a", "ended": true, "json": -1, "bin": 0, "problem": ""}',
    b'{"id": "ex-a", "ended": true, "json": 2, "bin": 1001, "problem": ""}',  # a file over its cap
    b'{"id": "ex-a", "ended": true, "json": 2, "bin": 0, "problem": "", "more": 1}',
])
def test_a_malformed_header_stops_the_reader_and_is_quoted_safely(header):
    reader = read(frame("ex-first", b"{}", b"") + header + b"\n" + b"\x1b[31m{}")
    assert list(reader.frames) == ["ex-first"]
    assert reader.failure.startswith("the probe sent a malformed frame header (")
    assert "\x1b" not in reader.failure and len(reader.failure) < 200


def test_a_header_line_longer_than_its_cap_is_read_no_further():
    stream = io.BytesIO(b"{" + b" " * (10 * MAX_HEADER_BYTES) + b"}\n")
    reader = FrameReader(stream, FILE_BYTES, TOTAL_BYTES)
    reader.run()
    assert reader.failure.startswith("the probe sent a malformed frame header")
    assert stream.tell() == MAX_HEADER_BYTES


def test_a_frame_cut_short_is_not_kept():
    whole = frame("ex-a", b"{}", b"z" * 50)
    reader = read(frame("ex-first", b"{}", b"") + whole[:-10])  # the probe was killed mid-frame
    assert list(reader.frames) == ["ex-first"]


class BrokenPipe(io.RawIOBase):
    def readable(self):
        return True

    def readinto(self, buffer):
        raise OSError("broken pipe")


def test_a_broken_pipe_is_reported_not_raised():
    reader = FrameReader(io.BufferedReader(BrokenPipe()), FILE_BYTES, TOTAL_BYTES)
    reader.run()
    assert reader.failure == "reading the probe failed (OSError)" and reader.frames == {}
