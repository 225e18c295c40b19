import json
import warnings

import pytest

from tpu_workbench.bench.published import published_records
from tpu_workbench.bench.results import (
    SCHEMA_VERSION,
    Record,
    SchemaError,
    append_records,
    load_results,
    read_records,
)


def _rec(**kw):
    base = dict(
        provenance="measured",
        workload="tiny",
        phase="train",
        device="cpu",
        tokens_per_s=10.0,
        step_samples_s=[0.1, 0.11],
        source={"kind": "measured", "git_revision": "x"},
    )
    return Record(**{**base, **kw})


def test_round_trip_and_version():
    r = _rec()
    d = json.loads(json.dumps(r.to_dict()))
    assert d["schema_version"] == SCHEMA_VERSION
    assert Record.from_dict(d) == r


def test_schema_rejections():
    with pytest.raises(SchemaError):
        _rec(provenance="guessed")
    with pytest.raises(SchemaError, match="raw"):
        _rec(step_samples_s=[])
    with pytest.raises(SchemaError):
        _rec(source={})
    with pytest.raises(SchemaError, match="schema_version"):
        Record.from_dict({**_rec().to_dict(), "schema_version": SCHEMA_VERSION + 1})


@pytest.mark.parametrize(
    "field, value",
    [
        ("batch", 0),
        ("seq", -1),
        ("tokens_per_s", 0.0),
        ("tokens_per_s", float("nan")),
        ("step_median_s", float("inf")),
    ],
)
def test_a_record_of_an_impossible_run_is_refused(field, value):
    with pytest.raises(SchemaError, match=f"{field} must be a positive finite number"):
        _rec(**{field: value})


def test_unknown_fields_are_kept():
    r = Record.from_dict({**_rec().to_dict(), "future_field": 3})
    assert r.extra["unknown_fields"] == {"future_field": 3}


def test_append_is_line_per_record_and_torn_line_is_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    append_records(path, [_rec(), _rec(batch=2)])
    with path.open("a") as f:  # a writer killed mid-record
        f.write('{"provenance": "measured", "workl')
    with pytest.warns(UserWarning, match="last line"):
        assert len(read_records(path)) == 2
    append_records(path, _rec(batch=3))  # the next run must not merge with the fragment
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = read_records(path)
    assert [r.batch for r in recs] == [None, 2, 3]
    assert any("torn" in str(w.message) for w in caught)


def test_load_results_many_files_one_frame(tmp_path):
    append_records(tmp_path / "a.jsonl", [_rec(device="cpu")])
    append_records(tmp_path / "sub" / "b.jsonl", [_rec(device="tpu"), _rec(device="tpu")])
    df = load_results(tmp_path / "a.jsonl", tmp_path / "sub")
    assert len(df) == 3 and set(df["device"]) == {"cpu", "tpu"} and "file" in df


def test_published_records_cover_the_numeric_rows():
    recs = published_records()
    rows = {r.source["row"] for r in recs}
    assert rows == {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14}
    for r in recs:
        assert (
            r.provenance == "published" and r.source["setting"] and r.source["figure"] and r.source["title"]
        )
    row4 = next(r for r in recs if r.source["row"] == 4)
    assert (row4.tokens_per_s_per_chip, row4.mfu, row4.chip) == (25700.0, 0.59, "TPU v7")
    row5 = sorted((r for r in recs if r.source["row"] == 5), key=lambda r: r.n_chips)
    assert [r.tokens_per_s_per_device for r in row5] == [2236.0, 2104.0]
    unverified = [r for r in recs if r.source["row"] in (9, 10)]
    assert all(not r.source["primary_matched"] for r in unverified)


def test_a_killed_writer_loses_no_completed_record(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "k.jsonl"
    code = (
        "import sys\n"
        "from tpu_workbench.bench.results import Record, append_records\n"
        "i = 1\n"
        "while True:\n"
        "    append_records(sys.argv[1], Record(provenance='projected', workload='w', phase='train', device='x',\n"
        "                                       batch=i, source={'kind': 'projected'}, extra={'pad': 'x' * 20000}))\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)])
    deadline = time.time() + 30
    while time.time() < deadline and (not path.exists() or path.read_text().count("\n") < 5):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = read_records(path)
    assert len(recs) >= 5
    assert [r.batch for r in recs] == list(range(1, len(recs) + 1))
