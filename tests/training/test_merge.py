"""`merge_adapter`'s refusals: they come before any model is loaded, so nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moot.core.errors import ConfigError, InputError
from moot.training.merge import merge_adapter


def adapter(folder: Path, config: str = '{"base_model_name_or_path": "org/base"}') -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(config, encoding="utf-8")
    return folder


def test_the_training_run_holding_the_adapter_is_never_the_output(tmp_path: Path) -> None:
    run = tmp_path / "run"
    adapter(run / "adapter")
    (run / "manifest.json").write_text("{}")
    with pytest.raises(ConfigError, match="must not be, hold or sit inside an input"):
        merge_adapter(run / "adapter", run)
    assert sorted(p.name for p in run.iterdir()) == ["adapter", "manifest.json"]


def test_a_folder_of_other_files_is_never_replaced(tmp_path: Path) -> None:
    other = tmp_path / "notes"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not an earlier merged-model output"):
        merge_adapter(adapter(tmp_path / "adapter"), other)
    with pytest.raises(ConfigError, match="not an earlier merged-model output"):
        merge_adapter(tmp_path / "adapter", other / "notes.txt")  # a file
    assert (other / "notes.txt").read_text() == "mine"


def test_a_local_base_model_is_never_the_output(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    config = json.dumps({"base_model_name_or_path": str(base)})
    with pytest.raises(ConfigError, match="input"):
        merge_adapter(adapter(tmp_path / "adapter", config), base)


@pytest.mark.parametrize(
    ("config", "problem"),
    [("{not json", "not a JSON object"), ("[1]", "not a JSON object"), ("{}", "no base_model")],
)
def test_an_unreadable_adapter_config_is_named(tmp_path: Path, config: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as caught:
        merge_adapter(adapter(tmp_path / "adapter", config), tmp_path / "out")
    assert "adapter_config.json" in str(caught.value)
    assert not (tmp_path / "out").exists()
