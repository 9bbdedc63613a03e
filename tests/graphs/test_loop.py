"""graphs/loop.py: what a stage reads, by content, and which earlier stages it reads from."""

from __future__ import annotations

from moot.graphs.loop import read_inputs


def test_inputs_count_by_content_and_paths_in_earlier_outputs_by_their_stage(tmp_path, monkeypatch):
    (tmp_path / "corpus" / ".moot").mkdir(parents=True)
    (tmp_path / "corpus" / "a.txt").write_text("Zoos protect species.")
    (tmp_path / "corpus" / ".moot" / "lock").write_text("pid 1")
    (tmp_path / "data.jsonl").write_text("{}\n")
    out = tmp_path / "out"
    outputs = {"gen": out / "gen.json", "sft": out / "sft"}
    texts = [
        "corpus", "data.train=data.jsonl", f"{out}/gen.json", f"hf/{out}/sft/adapter",
        f"{out}/control", ".", "/", "openai/gpt-4o-mini", "missing.json",
    ]  # fmt: skip
    monkeypatch.chdir(tmp_path)  # a run works in its recipe's folder
    digests: dict = {}
    inputs, stages = read_inputs(texts, outputs, out, digests)
    assert set(inputs) == {"corpus", "data.train=data.jsonl"}
    assert stages == ["gen", "sft"]
    (tmp_path / "corpus" / ".moot" / "lock").write_text("pid 2")  # moot's marks do not count
    assert read_inputs(texts, outputs, out, {})[0] == inputs
    assert read_inputs(texts, outputs, out, digests)[0] == inputs  # from the digests kept
    (tmp_path / "corpus" / "a.txt").write_text("Zoos protect species!")
    assert read_inputs(texts, outputs, out, digests)[0]["corpus"] != inputs["corpus"]
