"""The ``trace`` pattern: a user's own traffic replayed from a file (per-second rates or one timestamp per record)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacer_workloads import make_traffic, schedule_arrivals, trace
from pacer_workloads.trace import MAX_TRACE_SECONDS, TraceError, read_trace


def _file(tmp_path: Path, text: str, name: str = "trace.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _rows(file: str, duration: float, *, seed: int = 1, period: float = 1.0, **params: float | str) -> list[int]:
    traffic = make_traffic("trace", rate=1000, duration=duration, file=file, **params)
    return [a.rows for a in schedule_arrivals(traffic, duration=duration, seed=seed, period=period)]


# ---------------------------------------------------------------------- rates


def test_one_rate_per_line_replays_exactly(tmp_path: Path) -> None:
    file = _file(tmp_path, "120\n0\n3400\n17\n999\n")
    assert _rows(file, 5) == [120, 0, 3400, 17, 999]
    assert _rows(file, 8) == [120, 0, 3400, 17, 999, 0, 0, 0], "after its end the trace has no rows"
    assert _rows(file, 3) == [120, 0, 3400]
    traffic = make_traffic("trace", rate=1000, file=file)
    assert traffic.params() == {"file": file, "format": "rates", "scale": 1.0, "noise": 0.0}
    assert [traffic.rate(t) for t in (0, 0.5, 2.9, 4, 5, 100)] == [120, 120, 3400, 999, 0, 0]


def test_the_seed_does_not_change_a_trace_unless_noise_is_asked_for(tmp_path: Path) -> None:
    file = _file(tmp_path, "".join(f"{1000 + 10 * i}\n" for i in range(300)))
    assert _rows(file, 300, seed=1) == _rows(file, 300, seed=2) == [1000 + 10 * i for i in range(300)]
    assert not make_traffic("trace", rate=1, file=file).stochastic
    noisy = _rows(file, 300, seed=1, noise=1)
    assert noisy == _rows(file, 300, seed=1, noise=1) and noisy != _rows(file, 300, seed=2, noise=1)
    total = sum(1000 + 10 * i for i in range(300))
    assert abs(sum(noisy) - total) <= 5 * math.sqrt(total), "Poisson around the file's rows: 5 sd of sqrt(Σ)"


def test_second_rate_lines_with_a_header_gaps_and_iso_seconds(tmp_path: Path) -> None:
    file = _file(tmp_path, "second,rate\n1700000000,5\n1700000001,7\n# a comment\n\n1700000004,9\n")
    assert _rows(file, 6) == [5, 7, 0, 0, 9, 0], "a skipped second had no rows"
    iso = _file(tmp_path, "time;rate\n2024-05-07T10:00:00Z;30\n2024-05-07T10:00:01Z;40\n2024-05-07T10:00:02Z;50\n",
                name="iso.csv")
    assert _rows(iso, 3) == [30, 40, 50]
    relative = _file(tmp_path, "0\t1.5\n1\t2.5\n", name="tab.tsv")
    assert _rows(relative, 2, period=2.0) == [4], "rates integrate over a longer period"


def test_scale_multiplies_the_trace(tmp_path: Path) -> None:
    file = _file(tmp_path, "100\n200\n")
    assert _rows(file, 2, scale=2.5) == [250, 500]


def test_a_period_that_is_not_a_second_integrates_the_rates(tmp_path: Path) -> None:
    file = _file(tmp_path, "100\n200\n300\n400\n")
    assert _rows(file, 4, period=0.5) == [50, 50, 100, 100, 150, 150, 200, 200]
    assert _rows(file, 4, period=4 / 3) == [round(100 + 200 / 3), round(200 * 2 / 3 + 300 * 2 / 3),
                                            round(300 / 3 + 400)]


@settings(max_examples=30, deadline=None)
@given(rates=st.lists(st.integers(0, 10**6), min_size=1, max_size=50))
def test_any_rates_file_replays_exactly(tmp_path_factory: pytest.TempPathFactory, rates: list[int]) -> None:
    file = _file(tmp_path_factory.mktemp("t"), "".join(f"{r}\n" for r in rates))
    assert _rows(file, len(rates)) == rates


# ---------------------------------------------------------------------- timestamps


def test_one_epoch_timestamp_per_record_replays_the_counts_per_second(tmp_path: Path) -> None:
    start = 1_715_076_000.0
    stamps = [start + 0.1, start + 0.9, start + 1.5, start + 3.0, start + 3.2, start + 3.999, start + 0.5]
    file = _file(tmp_path, "timestamp\n" + "".join(f"{s}\n" for s in stamps))
    assert _rows(file, 5) == [3, 1, 0, 3, 0]
    traffic = make_traffic("trace", rate=1, file=file)
    assert traffic.params()["format"] == "timestamps"
    assert _rows(file, 4, period=0.5) == [1, 2, 0, 1, 0, 0, 2, 1], "records are counted where they fall"


def test_iso_timestamps_in_any_order(tmp_path: Path) -> None:
    t0 = datetime(2024, 5, 7, 10, 0, 0, tzinfo=UTC)
    stamps = [t0 + timedelta(seconds=s) for s in (2.5, 0.25, 0.75, 2.0, 1.0)]
    lines = [stamps[0].isoformat(), stamps[1].replace(tzinfo=None).isoformat(), *(s.isoformat() for s in stamps[2:])]
    file = _file(tmp_path, "\n".join(lines) + "\n")
    assert _rows(file, 3) == [2, 1, 2]


def test_format_overrides_the_detection(tmp_path: Path) -> None:
    file = _file(tmp_path, "5\n7\n")  # auto: rates
    assert _rows(file, 2) == [5, 7]
    assert _rows(file, 4, format="timestamps") == [1, 0, 1, 0], "records at 5 s and 7 s: from the first one's second"
    big = _file(tmp_path, "1715076000\n1715076000.5\n1715076002\n", name="big.csv")  # auto: timestamps
    assert _rows(big, 3) == [2, 0, 1]
    assert read_trace(big, "rates").rates == (1715076000.0, 1715076000.5, 1715076002.0)


# ---------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"has no data lines; a trace file holds one rate"),
        ("rate\n# nothing\n\n", r"has no data lines"),
        ("10\n20\nabc\n", r"line 3: rate 'abc' is not a number; fix or remove that line"),
        ("10\n-3\n", r"line 2: rate -3 is negative; a rate is rows/s >= 0"),
        ("1,2,3\n", r"line 1: 3 fields \('1,2,3'\); a line holds RATE, SECOND,RATE or one TIMESTAMP"),
        ("0,5\n2,6\n1,7\n", r"line 3: second '1' does not come after the previous line's; sort the lines"),
        ("0,5\n1.5,6\n", r"line 2: second '1.5' is not a whole number of seconds after the first line's"),
        ("0,5\nlater,6\n", r"line 2: second 'later' is neither a number of seconds nor an ISO-8601 date-time"),
        ("5\n1,6\n", r"line 2: SECOND,RATE after lone rates; give every line as SECOND,RATE or every line as RATE"),
        ("0,5\n6\n", r"line 2: a lone rate after SECOND,RATE lines"),
        ("2024-05-07T10:00:00\nyesterday\n", r"line 2: 'yesterday' is neither epoch seconds nor an ISO-8601"),
        ("1,nan\n", r"line 1: rate 'nan' is not a number"),
    ],
)
def test_a_bad_file_names_itself_the_line_and_what_to_do(tmp_path: Path, text: str, message: str) -> None:
    file = _file(tmp_path, text, name="bad.csv")
    with pytest.raises(TraceError, match=message) as info:
        make_traffic("trace", rate=1000, file=file)
    assert f"file {file!r}" in str(info.value)
    assert isinstance(info.value, ValueError), "callers report it like any bad traffic parameter"


def test_a_missing_file_or_parameter_says_what_to_give(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.csv")
    with pytest.raises(TraceError, match=f"file {missing!r} does not exist; give file=PATH of a trace"):
        make_traffic("trace", rate=1000, file=missing)
    with pytest.raises(TraceError, match="cannot read file .* give file=PATH of a readable text file"):
        make_traffic("trace", rate=1000, file=str(tmp_path))  # a folder
    with pytest.raises(ValueError, match="traffic 'trace' needs file=PATH: a CSV of per-second rates"):
        make_traffic("trace", rate=1000)
    file = _file(tmp_path, "1\n")
    with pytest.raises(ValueError, match="format must be one of auto, rates, timestamps, got 'json'"):
        make_traffic("trace", rate=1000, file=file, format="json")
    with pytest.raises(ValueError, match=r"traffic 'trace' has no parameter \['period'\]"):
        make_traffic("trace", rate=1000, file=file, period=3)
    with pytest.raises(ValueError, match="parameter 'scale' must be a finite number >= 0"):
        make_traffic("trace", rate=1000, file=file, scale=-1)


def test_a_file_name_read_as_a_number_is_still_a_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--traffic-param file=2024`` reaches make_traffic as 2024.0 (the command line reads numbers)."""
    monkeypatch.chdir(tmp_path)
    Path("2024").write_text("3\n4\n")
    assert _rows(2024.0, 2) == [3, 4]  # type: ignore[arg-type]


# ---------------------------------------------------------------------- span


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1700000000\n1700000000123\n", r"line 2: timestamp '1700000000123' looks like epoch milliseconds \(about "
         r"1,000 times line 1's '1700000000'\); timestamps must all be epoch seconds: divide it by 1,000"),
        ("1700000000123\n1700000000456\n1700000001\n", r"line 3: timestamp '1700000001' is epoch seconds but most "
         r"look like epoch milliseconds \(e.g. line 1's '1700000000123'\); .* divide the others by 1,000"),
        ("1700000000\n1700000001\n1700000000123456\n", r"line 3: timestamp '1700000000123456' looks like epoch "
         r"microseconds .* divide it by 1,000,000"),
        ("1700000000\n1731536000\n", r"line 2: timestamp '1731536000' is 365.0 days after the earliest, line 1's "
         r"'1700000000', more than the 7.0 days a trace may span; split the file into traces of at most that"),
        ("1700000000\n1700000001\n100000000\n", r"line 1: timestamp '1700000000' is 18,518.5 days after the "
         r"earliest, line 3's '100000000', more than the 7.0 days .* or remove a stray timestamp"),
        ("2024-05-07T10:00:00Z\n2025-05-07T10:00:00\n", r"line 2: timestamp '2025-05-07T10:00:00' is 365.0 days"),
        ("second,rate\n1700000000,5\n1700000000123,6\n", r"line 3: second '1700000000123' looks like epoch "
         r"milliseconds \(about 1,000 times line 2's '1700000000'\); SECOND must be epoch seconds on every line"),
        ("0,5\n1000000000000,6\n", r"line 2: second '1000000000000' is 11,574,074.1 days after line 1's '0', more "
         r"than the 7.0 days a trace may span; split the file into traces of at most that, or fix that line"),
    ],
)
def test_a_trace_spanning_more_than_a_week_names_the_line_instead_of_running_out_of_memory(
        tmp_path: Path, text: str, message: str) -> None:
    """A stray time or one in milliseconds once made a per-second array over the whole span: a MemoryError."""
    file = _file(tmp_path, text, name="far.csv")
    with pytest.raises(TraceError, match=message) as info:
        make_traffic("trace", rate=1000, file=file)
    assert f"file {file!r}" in str(info.value)


def test_the_span_limit_is_a_week_and_a_trace_of_exactly_the_limit_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_TRACE_SECONDS == 7 * 86_400
    monkeypatch.setattr(trace, "MAX_TRACE_SECONDS", 10)  # the same bound, cheap to reach
    assert read_trace(_file(tmp_path, "0,5\n9,6\n")).seconds == 10
    assert read_trace(_file(tmp_path, "1\n" * 10)).seconds == 10
    assert read_trace(_file(tmp_path, "1715076000\n1715076009.99\n")).seconds == 10
    with pytest.raises(TraceError, match=r"line 2: second '10' is 10 s after line 1's '0', more than the 10 s"):
        read_trace(_file(tmp_path, "0,5\n10,6\n"))
    with pytest.raises(TraceError, match=r"line 11: more than 10 rates, so the trace spans more than 10 s, the most "
                                         r"a trace may span; split the file into traces of at most 10 lines"):
        read_trace(_file(tmp_path, "1\n" * 11))
    with pytest.raises(TraceError, match=r"line 2: timestamp '1715076010' is 10 s after the earliest, line 1's"):
        read_trace(_file(tmp_path, "1715076000.5\n1715076010\n"))
