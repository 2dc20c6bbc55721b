"""The service-time model kept with a ``format("pacer")`` query's checkpoint
(:mod:`pacer_spark.driver.protocol.model_store`), without Spark: what a restart takes over must be in range, the file
must live inside the checkpoint Spark names, and a checkpoint that cannot keep one must say so."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from pacer.service_time import ServiceTimeModel
from pacer_spark.driver.protocol import model_store

LOGGER = "pacer_spark.driver.protocol.model_store"


def _fitted_state() -> dict[str, Any]:
    """The state a run saves after a few batches of different sizes (as JSON gives it back)."""
    model = ServiceTimeModel()
    for nbytes, seconds in [(1e6, 0.5), (2e6, 0.7), (4e6, 1.1), (8e6, 1.9), (3e6, 0.95)]:
        model.observe(nbytes, seconds)
    state: dict[str, Any] = json.loads(json.dumps(model.state()))
    return state


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_the_range_checks_cover_every_field_of_the_saved_model() -> None:
    """Every field :meth:`ServiceTimeModel.state` writes is checked, or compared by ``restore`` itself (version,
    halflife): a new field in the model's form fails here until its range is said."""
    assert set(model_store.FIELDS) | {"version", "halflife"} == set(ServiceTimeModel().state())
    assert model_store.out_of_range(_fitted_state()) is None


#: A field of the fitted state, the JSON text its value is replaced with, out of range.
OUT_OF_RANGE = [
    ("seen", "1e999"),  # JSON's infinity: int() of it raised OverflowError in restore, past the caller's except
    ("seen", "NaN"),
    ("n", "-1"),
    ("n", "1000000"),  # more batches fitted than seen
    ("seen", "true"),
    ("seen", "2.5"),
    ("seen", "1" + "0" * 400),  # a count beyond any
    ("largest_mb_per_slot", "1e999"),
    ("largest_mb_per_slot", "1e300"),  # finite, but a first batch as large as twice that admits the whole backlog
    ("largest_mb_per_slot", "1" + "0" * 400),  # float() of it overflows
    ("largest_mb_per_slot", '"12"'),
    ("ceiling_mb_per_slot", "Infinity"),
    ("ceiling_mb_per_slot", "0"),
    ("sums", "[1, 2, 3, 4]"),
    ("sums", "[1, 2, 1e999, 4, 5]"),
    ("sums", "[1, -2, 3, 4, 5]"),
    ("sums", '"12345"'),
    ("errors", "[1.2, 0]"),
    ("errors", "[1.2, -Infinity]"),
    ("proportional_errors", "[1.0, NaN]"),
    ("proportional_errors", "[" + ",".join(["1.1"] * 20_000) + "]"),  # absurdly many
    ("prior_batches", "-3"),
    ("slots", "0"),
]


@pytest.mark.parametrize(("field", "bad_json"), OUT_OF_RANGE, ids=[f"{f}={v[:12]}" for f, v in OUT_OF_RANGE])
def test_a_saved_model_out_of_range_is_ignored_with_one_warning_naming_the_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, bad_json: str
) -> None:
    """A model pacer wrote loads as it was; one whose ``field`` is out of range is not restored (the query probes
    from its first batch instead of sizing it from nonsense), and one warning names the file, the field and that."""
    path = tmp_path / "pacer" / "service-model.json"
    state = _fitted_state()
    model_store.save(path, state)
    assert model_store.load(path) == state

    placeholder = "__OUT_OF_RANGE__"
    path.write_text(json.dumps({**state, field: placeholder}).replace(f'"{placeholder}"', bad_json))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert model_store.load(path) is None
    [warning] = _warnings(caplog)
    assert str(path) in warning and repr(field) in warning and "probe" in warning


def test_a_model_missing_a_field_is_ignored_with_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model of this version without a field ``restore`` reads would fail there: it is refused up front, named."""
    path = tmp_path / "service-model.json"
    state = _fitted_state()
    del state["sums"]
    path.write_text(json.dumps(state))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert model_store.load(path) is None
    [warning] = _warnings(caplog)
    assert str(path) in warning and "'sums'" in warning and "probe" in warning


def test_a_model_file_larger_than_any_pacer_writes_is_not_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file of megabytes is no model pacer wrote (a few kilobytes): it is ignored, with one warning, unread."""
    path = tmp_path / "service-model.json"
    path.write_text(json.dumps({**_fitted_state(), "padding": "x" * (4 << 20)}))  # 4 MiB
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert model_store.load(path) is None
    [warning] = _warnings(caplog)
    assert str(path) in warning and "bytes" in warning and "probe" in warning


@pytest.mark.parametrize("checkpoint_name", ["my ck", "100%", "ck-çé-日本", "a#b?c"])
@pytest.mark.parametrize("uri_prefix", ["file:", "file://", "file://localhost"])
def test_a_percent_encoded_file_uri_keeps_the_model_inside_its_checkpoint(
    tmp_path: Path, checkpoint_name: str, uri_prefix: str
) -> None:
    """Spark names a source's checkpoint folder by a percent-encoded ``file:`` URI: the model goes to
    ``<checkpoint>/pacer/service-model.json`` of the folder it names, not to a sibling named by its encoding."""
    checkpoint = tmp_path / checkpoint_name
    source_uri = uri_prefix + quote(str(checkpoint / "sources" / "0"))
    path = model_store.model_path(source_uri)
    assert path == checkpoint / "pacer" / "service-model.json"

    model_store.save(path, _fitted_state())
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint_name]


@pytest.mark.parametrize("scheme", ["hdfs", "s3a", "gs"])
def test_a_remote_checkpoint_keeps_no_model_and_says_so_once(caplog: pytest.LogCaptureFixture, scheme: str) -> None:
    """A checkpoint on another filesystem keeps no model (pacer writes with the local filesystem only): one warning
    names its scheme, why and what follows (probes after a restart), for all its sources and runs; another
    checkpoint is warned of too."""
    checkpoint = f"{scheme}://cluster/checkpoints/{uuid.uuid4().hex}"  # not warned of by an earlier test
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _run in range(3):
            for source in ("0", "1"):
                assert model_store.model_path(f"{checkpoint}/sources/{source}") is None
    [warning] = _warnings(caplog)
    assert checkpoint in warning and f"{scheme}:" in warning and "local" in warning and "probe" in warning

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert model_store.model_path(f"{checkpoint}-other/sources/0") is None
    assert len(_warnings(caplog)) == 1
