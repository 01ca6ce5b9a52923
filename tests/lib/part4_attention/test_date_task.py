"""Tests for lib/part4_attention/date_task.py, chapter 10's task: every format by hand, the standard library's
``datetime.strptime`` parsing every written date back, pairs, splits and error messages.

(The other tasks are tested beside their models: reversal in test_training.py, the memory task
in test_gating.py, sorting in test_seq2seq.py with the pointer network, bAbI in test_memn2n.py.)
"""

import datetime

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part4_attention.date_task import DATE_FORMATS, DateTask

FAST = settings(max_examples=25, deadline=None, database=None)


def test_every_format_writes_a_hand_checked_string():
    task, date = DateTask(), datetime.date(2021, 4, 3)  # a Saturday
    written = {fmt: task.write(date, fmt) for fmt in DATE_FORMATS}
    assert written == {
        "d.m.yyyy": "3.4.2021",
        "dd.mm.yyyy": "03.04.2021",
        "mm/dd/yyyy": "04/03/2021",
        "d Mon yyyy": "3 Apr 2021",
        "d Month yyyy": "3 April 2021",
        "Month d, yyyy": "April 3, 2021",
        "MON d yyyy": "APR 3 2021",
        "Day, Mon d, yyyy": "Sat, Apr 3, 2021",
        "dth of Month yyyy": "3rd of April 2021",
        "Weekday, d Month yyyy": "Saturday, 3 April 2021",
        "Weekday, Month dth, yyyy": "Saturday, April 3rd, 2021",
    }
    ordinals = [task.write(datetime.date(2021, 1, d), "dth of Month yyyy").split()[0] for d in (1, 2, 3, 4, 11, 12,
                                                                                             13, 21, 22, 23, 31)]
    assert ordinals == ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]
    assert {task.format_of(text, date) for text in written.values()} == set(DATE_FORMATS)
    with pytest.raises(ValueError, match="no format writes 2021-04-03 as '3/4/21'"):
        task.format_of("3/4/21", date)


# strptime patterns (C locale) for the formats without ordinals or upper case.
STRPTIME = {
    "d.m.yyyy": "%d.%m.%Y", "dd.mm.yyyy": "%d.%m.%Y", "mm/dd/yyyy": "%m/%d/%Y", "d Mon yyyy": "%d %b %Y",
    "d Month yyyy": "%d %B %Y", "Month d, yyyy": "%B %d, %Y", "MON d yyyy": "%b %d %Y",
    "Day, Mon d, yyyy": "%a, %b %d, %Y", "Weekday, d Month yyyy": "%A, %d %B %Y",
}


@FAST
@given(st.dates(datetime.date(1900, 1, 1), datetime.date(2099, 12, 31)), st.sampled_from(sorted(STRPTIME)))
def test_property_the_standard_library_parses_every_written_date_back(date, fmt):
    text = DateTask().write(date, fmt)
    assert datetime.datetime.strptime(text, STRPTIME[fmt]).date() == date


def test_pairs_round_trip_and_have_iso_targets():
    task = DateTask()
    dates = [datetime.date(1999, 12, 31), datetime.date(2000, 2, 29)]
    texts = ["Friday, December 31st, 1999", "2.9.2000"[:0] + "29.2.2000"]
    pairs = task.pairs(texts, dates)
    assert pairs.src.shape == (2, len(texts[0])) and pairs.src_lens.tolist() == [len(t) for t in texts]
    assert [task.source_text(row.tolist()) for row in pairs.src] == texts
    assert [task.target_text(row.tolist()) for row in pairs.tgt_out] == ["1999-12-31", "2000-02-29"]
    assert pairs.tgt_in[:, 0].tolist() == [task.bos] * 2 and pairs.tgt_out[:, -1].tolist() == [task.eos] * 2
    assert torch.equal(pairs.tgt_in[:, 1:], pairs.tgt_out[:, :-1])


def test_split_holds_out_whole_dates_is_reproducible_and_nested():
    task = DateTask()
    train, test, texts = task.split(300, 100, seed=3)
    train_dates = {task.target_text(row.tolist()) for row in train.tgt_out}
    test_dates = {task.target_text(row.tolist()) for row in test.tgt_out}
    assert len(train_dates) == 300 and len(test_dates) == 100 and not train_dates & test_dates
    assert [task.source_text(row.tolist()) for row in test.src] == texts
    smaller, same_test, _ = task.split(120, 100, seed=3)
    assert torch.equal(same_test.src, test.src)
    assert torch.equal(smaller.tgt_out, train.tgt_out[:120])
    assert len({task.write(datetime.date(2000, 1, 1), f) for f in DATE_FORMATS}) == len(DATE_FORMATS)


def test_month_span_finds_the_month_word_in_every_spelling():
    task = DateTask()
    date = datetime.date(2021, 3, 7)  # a Sunday in March
    spans = {fmt: task.month_span(task.write(date, fmt)) for fmt in DATE_FORMATS}
    texts = {fmt: task.write(date, fmt) for fmt in DATE_FORMATS}
    words = {fmt: texts[fmt][span[0]:span[1]] for fmt, span in spans.items() if span is not None}
    assert words == {"d Mon yyyy": "Mar", "d Month yyyy": "March", "Month d, yyyy": "March", "MON d yyyy": "MAR",
                     "Day, Mon d, yyyy": "Mar", "dth of Month yyyy": "March", "Weekday, d Month yyyy": "March",
                     "Weekday, Month dth, yyyy": "March"}
    assert spans["dd.mm.yyyy"] is None and spans["mm/dd/yyyy"] is None and spans["d.m.yyyy"] is None


def test_date_task_errors_name_expected_and_found():
    task = DateTask()
    with pytest.raises(ValueError, match=r"text may use only the characters .*; found \['#'\]"):
        task.encode_source("3#4")
    with pytest.raises(TypeError, match=r"(?s)parameter 'fmt'.*Actual value: 'yyyy'.*Literal\['d.m.yyyy'"):
        task.write(datetime.date(2000, 1, 1), "yyyy")
    with pytest.raises(ValueError, match=r"last_year must be an int >= 2000 and <= 9999 \(first_year = 2000\); found 1999"):
        DateTask(first_year=2000, last_year=1999)
    with pytest.raises(ValueError, match="n must be at most the 366 available dates; found n = 400"):
        DateTask(2000, 2000).sample(400)
    with pytest.raises(ValueError, match="pad, bos and eos must be 0, 1 and 2 .*; found pad = 0, bos = 0, eos = 2"):
        DateTask(bos=0)  # ids from 3 on are characters, so the three specials must be 0, 1, 2
    with pytest.raises(TypeError, match=r"(?s)parameter 'eos'.*Actual value: None.*is_at_least_0"):
        DateTask(eos=None)
    with pytest.raises(ValueError, match="target_chars must be distinct characters including '-0123456789'"):
        DateTask(target_chars="0123456789")
    with pytest.raises(ValueError, match="tokens must be ids below tgt_vocab_size = 14; found 99"):
        task.target_text([4, 99])
    with pytest.raises(ValueError, match="tokens must be ids below src_vocab_size = .*; found 999"):
        task.source_text([999])
