"""Golden-output harness for the `moot` CLI: record a digest of every output file, compare two.

Runs a fixed table of `moot` commands (`COMMANDS`), each as a subprocess of the interpreter that
runs this script (`sys.executable -m moot ...`, so run it with the venv of the tree under test),
against an in-process scripted OpenAI-compatible server, and records per command the argv, the
exit code, stdout, stderr and a normalised SHA-256 of every file in its output folder.

    python golden_outputs.py record --work DIR --digest FILE.json [--only NAME ...]
    python golden_outputs.py compare A.json B.json

`record` deletes and recreates DIR, writes the input fixtures to DIR/inputs (small slices of
the paper data in --data, default ../shared/data beside the repository), then runs the commands
with DIR as their working folder. Every model call goes to the scripted server (`--api-base`),
every command gets a fresh request cache (DIR/cache-<n>.sqlite) and `--concurrency 1`, so the
answers and their order are deterministic. Record twice into the same DIR and compare: there
must be no difference.

Normalisation (all of it is listed in the digest):
- the server URL, the work folder, the venv, the repository and the data folder are replaced
  by placeholders in every text (argv, stdout, stderr, file contents);
- JSON and JSONL files are parsed and re-serialised canonically without the fields in
  `VOLATILE_FIELDS` (timings, timestamps, package versions), with the file-system-dependent
  parts of `VOLATILE_VALUES` (a file mtime) blanked and the lists of `SORTED_FIELDS` sorted;
  Markdown files of `SORTED_FRONT_MATTER` get their front-matter lists sorted;
- `VOLATILE_TEXT` (a card's folder size) is blanked in other text files;
- `VOLATILE_PATTERNS` (durations, the summary table's seconds, progress bars, log timestamps)
  are blanked in stdout/stderr;
- files matching `SKIPPED` are listed with the reason but not hashed (a SQLite database, ...).

`compare` prints per command the files added, removed and changed and exit-code differences,
then stdout/stderr differences (lower priority); it exits 1 when a file or an exit code differs.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import fnmatch
import hashlib
import importlib.util
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

try:  # public as moot.testing since issue 30; a tree from before it has it in core
    from moot.testing import Fault, Rule, ScriptedServer, ServerConfig
except ImportError:
    from moot.core.testing.scripted_server import Fault, Rule, ScriptedServer, ServerConfig

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data
PORT = 28613  # fixed, below the ephemeral range; the URL is replaced by <API> in any case
TIMEOUT = 900  # seconds per command

# What differs between two recordings of the same tree, found by recording twice. JSON fields
# are named by a file glob (on the path in the work folder) and a field path: keys and list
# indices joined by dots ("runs.0.started"), where `*` matches anything, dots included. Paths are
# anchored at the document's root, so a word that is a key in a data map is kept (bm25's
# vocab.index.json has the keys "started" and "created").
VOLATILE_FIELDS = (  # (file, field, why): removed before hashing
    ("*manifest.json", "runs.*.started", "moot debate/merge: Unix time of each run"),
    ("*manifest.json", "runs.*.seconds", "moot debate/merge: wall time of each run"),
    ("*manifest.json", "seconds", "moot train sft: wall time"),
    ("*.json", "ledger*.latency_s", "usage ledgers: measured request time"),
    ("*.json", "log_history.*.*_runtime", "trainer log: timings"),
    ("*.json", "log_history.*.*_per_second", "trainer log: throughput"),
    ("*manifest.json", "versions", "installed package versions"),
    ("*summary.json", "versions", "installed package versions"),
    (
        "mix/manifest.json",
        "inputs.0.sha256",
        "hash of the files of the debate/generated folder, whose manifest.json holds run times",
    ),
)
VOLATILE_VALUES = (  # (file, field, regex, replacement, why): substituted in a JSON string
    (
        "*summary.json",
        "scorer_identity",
        r"(\.safetensors:\d+):\d+",
        r"\1:<MTIME>",
        "moot eval pd: the scorer's weight file mtime (the model is rebuilt by every recording)",
    ),
    (
        "*.moot/pd.json",
        "scorer",
        r"(\.safetensors:\d+):\d+",
        r"\1:<MTIME>",
        "moot eval pd claim: the same scorer identity",
    ),
)
SORTED_FIELDS = (  # (file, field, why): a list compared as a sorted list
    (
        "*adapter_config.json",
        "target_modules",
        "peft writes a set: its order follows the string hash seed",
    ),
)
SORTED_FRONT_MATTER = (  # (file, why): lists in a Markdown file's YAML front matter sorted
    ("train/*README.md", "trl model card: its tags list is a set, ordered by the hash seed"),
)
# Regex replacements in text files other than JSON: (file glob, pattern, replacement, why).
VOLATILE_TEXT = (
    (
        "*README.md",
        r"\| folder bytes \| \d+ \|",
        "| folder bytes | <BYTES> |",
        "dataset cards: the folder's size counts its manifest's run times",
    ),
)
# Regex replacements in stdout and stderr: durations and rates.
VOLATILE_PATTERNS = (
    (r"(?m)^(.*\s\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+)\d+\.\d$", r"\1<SECONDS>"),  # tallies
    (r"\b\d+(\.\d+)?\s?(s|ms)\b", "<DURATION>"),  # "2.7s", "65 ms"
    (r"\b\d+(\.\d+)?/s\b", "<RATE>/s"),  # "38.5/s"
    (r"\[[0-9:]+<[0-9:?]+, [^\]]*\]", "[<PROGRESS>]"),  # tqdm "[00:00<00:00, 82.31it/s]"
    (r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]", "[<TIMESTAMP>]"),  # logging time
)
# Files not compared bytewise (glob on the path relative to the work folder).
SKIPPED = (
    ("*.sqlite", "SQLite database (checkpoints, request cache): page layout is not stable"),
    ("*.sqlite-wal", "SQLite write-ahead log"),
    ("*.sqlite-shm", "SQLite shared memory"),
    ("*.moot/progress.json", "the run's live progress: its times and process id"),
)

# --------------------------------------------------------------------------------------------
# Scripted replies


def j(value: Any) -> str:
    """JSON text of a reply."""
    return json.dumps(value)


ARGUMENTS = j({"arguments": ["First argument holds.", "Second argument holds."]})
SCORE = Rule(r'"score": <1-10>', j({"comment": "solid", "score": 6}), role="last")
CRITERIA = {n: 2 if 9 <= n <= 12 else 1 for n in range(1, 16)}


def scores(**changes: int) -> str:
    """A CompQA rubric reply: full marks, criteria named `c<N>` changed."""
    points = CRITERIA | {int(k[1:]): v for k, v in changes.items()}
    return j({str(n): p for n, p in points.items()})


def winner(name: str) -> Rule:
    """The judge names `name` as the winner of debates where `name` is on the con side."""
    return Rule(f'Con side debaters are: {re.escape(name)}\n.*"winner"', j({"winner": name}))


#: A fenced text's opening and closing lines (`moot.prompts.fence`), around the text a rule matches.
OPEN, CLOSE = r"<<<\w+ [0-9a-f]+>>>\n\s*", r"\n<<<end \w+ [0-9a-f]+>>>"


def debatune_rules(fx: dict) -> list[Rule]:
    """Controllability and quality verdicts keyed on the real DEBATunE responses."""
    rules = [Rule("could not be read", "still no numbers")]
    verdicts = [
        "100 0\nFully supportive.",
        "Support: 80%, Oppose: 20%",
        "I cannot tell.",
        "0 100",
        "50 50",
        "0 100",
    ]
    for record, verdict in zip(fx["ours"], verdicts, strict=True):
        text = re.escape(record["response"].strip()[:120])
        rules.append(Rule(r"Arguments\]\n\s*" + OPEN + text, verdict))
    # quality: (ours, baseline) forward, then swapped; per argument a win, tie, loss or failure
    pairs = [("9 5", "5 9"), ("8 6", "8 6"), ("3 8", "8 3"), ("bad", "bad"), ("7 7", "6 7")]
    for record, (forward, backward) in zip(fx["ours"], pairs, strict=False):
        argument = re.escape(record["argument"])
        first = f"{argument}.*Assistant 1's Answer\\]\n\\s*{OPEN}"
        rules.append(Rule(first + "(Thank|Negative)", forward))
        rules.append(Rule(first + "I apologize", backward))
    rules.append(Rule("Assistant 1's Answer", "8 4"))
    return rules


def judge_rules(fx: dict) -> list[Rule]:
    """Scores for every debater; winners for the first debate and the moot JSON debates only."""
    first = fx["panelbench"][0]
    return [
        Rule(
            f"score for {re.escape(first['pro'][0])} from 1 to 10",
            j({"comment": "sharp", "score": 8}),
            role="last",
        ),
        SCORE,
        winner(first["con"][0]),
        winner("Bob"),
    ]


def berds_rules(fx: dict) -> list[Rule]:
    """First perspective supported by every chunk, one question garbled, the rest No."""
    rules = [Rule("could not be read", "still unsure")]
    for index, question in enumerate(fx["questions"]):
        first, second = question["perspectives"][:2]
        if index == 2:
            rules.append(Rule(f"Statement: {re.escape(first)}\n", "Hmm."))
        rules.append(Rule(f"Statement: {re.escape(first)}\n", "Yes."))
        rules.append(Rule(f"Statement: {re.escape(second)}\n", "**Yes**" if index == 1 else "No"))
    return [*rules, Rule("Statement:", "No")]


def detector_rules(fx: dict) -> list[Rule]:
    """Correct labels, except a false positive, a false negative and an unparseable reply."""
    replies = {"1": "Yes", "3": "Maybe", "7": "No."}
    rules = [Rule("could not be read", "still unsure")]
    for _, pair_id, document, perspective, label in fx["pairs"]:
        reply = replies.get(pair_id, "Yes." if label == "1" else "Answer: No")
        fenced = f"{OPEN}{re.escape(document)}{CLOSE}"
        rules.append(Rule(f"Document: {fenced}\nStatement: {re.escape(perspective)}\n", reply))
    return rules


def da_rules(fx: dict) -> list[Rule]:
    """Dispute awareness 1, 0 and an unreadable reply for the three questions."""
    replies = ["1", "Output: 0", "I cannot say."]
    rules = [Rule("could not be read", "still unsure")]
    for question, reply in zip(fx["questions"], replies, strict=True):
        rules.append(Rule(f"Question: {re.escape(question['question'])}", reply))
    return rules


REACT = [
    Rule("## Question:", "It is debated; the documents show both sides.", role="last"),
    Rule("no searches left", "Thought: done.\nFinal Answer: It is debated.", role="last"),
    Rule("search 1 of 3", "Thought: other side?\nSearch: costs of it", role="last"),
    Rule("search 2 of 3", "Thought: evidence.\nSearch: trials", role="last"),
    Rule("search 3 of 3", "Thought: more!\nSearch: anything", role="last"),
]
POVS = (  # the reply format of DebateQA's p_POV (Table 9)
    "Point-of-View 1: It protects the people concerned. [Document [1], [2]]\n"
    "Point-of-View 2: It protects the people concerned a lot. [Document [3]]\n"
    "Point-of-View 3: It harms the economy. [Document [99]]"
)
CURATE = [
    Rule("Task: Generate Points-of-View", POVS),
    Rule("Task: Provide an Answer", "The documents give reasons and evidence for it."),
]
EXPANSION = [
    Rule(
        "Question: Would banning", j({"Child Safety": "it protects children", "Harm": "it harms"})
    ),
    Rule("Question: Is free university", "no JSON at all"),
]
COMPQA_ANSWER = (
    "Summary:\nBoth have loyal followers.\n\nMain Aspects of Comparison:\n"
    "- Price: one is cheaper [1].\n\nBest Option:\nneither"
)
COMPARE = [
    Rule(
        "name the two objects.*Nike",
        j({"object1": "Nike", "object2": "Adidas", "aspect": "comfort"}),
    ),
    Rule("name the two objects", "I am not sure which objects these are."),
    Rule(
        "List arguments for a comparison",
        j({"object1": ["A is cheaper than B."], "object2": ["B lasts longer than A."]}),
    ),
    Rule("(?i)best option", COMPQA_ANSWER),
]
RUBRIC = [
    Rule(r"could not be used|not a valid", "Still fine to me."),
    Rule(r"Question: [^\n]*baseball", scores()),  # 19
    Rule(r"Question: [^\n]*basketball", scores(c15=0)),  # 18
    Rule(r"Question: [^\n]*ASP", "Looks fine to me."),  # invalid after its repair round
    Rule(r"Question: [^\n]*Nike", scores(c9=1, c10=1, c15=0)),  # 16
    Rule("Comparative answer", scores(c2=0)),  # 18
]

# --------------------------------------------------------------------------------------------
# The commands


@dataclass
class Command:
    """One `moot` invocation.

    Attributes:
        name: Unique name in the digest.
        args: The arguments after `moot`, shell-quoted; `$API` is the server URL, `$CACHE` a
            fresh request cache file and `$DATA` the paper data folder.
        expect: The intended exit code (1 where the command is a failure case on purpose).
        rules: Scripted replies: a list, or a function of the fixture facts that returns one.
        faults: Failures the server injects.
    """

    name: str
    args: str
    expect: int = 0
    rules: list[Rule] | Callable[[dict], list[Rule]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)

    @property
    def output(self) -> str:
        """The folder whose files are digested: `--out`, or the folder of an `--out` file."""
        words = shlex.split(self.args)
        if "--out" in words:
            out = words[words.index("--out") + 1]
        else:  # train sft names its folder in an override
            out = next(w.split("=", 1)[1] for w in words if w.startswith("training.output_dir="))
        return str(Path(out).parent) if Path(out).suffix else out


CALL = "--api-base $API --cache $CACHE --max-retries 0"  # every model-calling command
API = f"{CALL} --concurrency 1"
DEBATE = f"--arguments-per-stance 1 --rounds 2 --model openai/scripted {API}"
TOPICS = "--topics inputs/topics.json"
GIVEN = "--topics inputs/debate_test_arg.jsonl"  # topics with arguments (DEBATunE test shape)
DEBATER = [Rule("list your arguments", ARGUMENTS)]
QUALITY = (
    "eval quality --responses inputs/debatune_7b.json --baseline inputs/llama2_7b.json "
    "--mask 'ladies and gentlemen' --mask Iran --out eval/quality"
)
QA = "--questions inputs/questions.jsonl"
SCRIPTED = f"--model openai/scripted {API}"
PD = (
    "eval pd --answers qa/answer-plain/answers.jsonl "
    "--partial-answers qa/curate/partial_answers.jsonl --scorer train/merged"
)
CQ = "--questions inputs/compqa_questions.jsonl"
GPT = f"--model openai/gpt {API}"
COMPARED = [  # answer files of the compare runs: (folder, generator_scenario_N)
    ("s1", "gpt_scenario_1"),
    ("s2", "gpt_scenario_2"),
    ("s3", "gpt_scenario_3"),
    ("s4", "gpt_scenario_4"),
    ("free", "free_scenario_3"),
]
ANSWERS = " ".join(f"compqa/{folder}/{name}.json" for folder, name in COMPARED)
JUDGED = " ".join(f"compqa/judged0/judged/{name}.json" for _, name in COMPARED)
GOLD = "$DATA/compqa/evaluated_summaries/gpt-4"
TRAIN = (
    "train sft --config inputs/train-tiny.yaml data.train=mix training.output_dir=train/sft "
    "training.epochs=2 training.logging_steps=2 training.save_steps=4 --quiet"
)
COMMANDS = [
    # DEBATunE debate data: generated and given arguments, shards and their merge
    Command("debate-generated", f"debate {TOPICS} --out debate/generated {DEBATE}", rules=DEBATER),
    Command(
        "debate-given",
        f"debate {GIVEN} --out debate/given --temperature-b 0.9 {DEBATE}",
        expect=1,  # one conclusion gets an HTTP 400: a failed debate (retried by the rerun)
        faults=[Fault("400", match="watching a debate.*real-life events")],
    ),
    Command(
        "debate-shard0", f"debate {TOPICS} --out debate/s0 --shard 0/2 {DEBATE}", rules=DEBATER
    ),
    Command(
        "debate-shard1", f"debate {TOPICS} --out debate/s1 --shard 1/2 {DEBATE}", rules=DEBATER
    ),
    Command("merge", "merge debate/s0 debate/s1 --out debate/merged"),
    # DEBATunE evaluation
    Command(
        "generate",
        "generate --dataset inputs/debate_test_arg.jsonl --out generate/responses.json "
        f"--max-tokens 64 {SCRIPTED}",
    ),
    Command(
        "eval-controllability",
        f"eval controllability --responses inputs/debatune_7b.json --out eval/controllability "
        f"--judge openai/judge {API}",
        rules=debatune_rules,
    ),
    Command("eval-quality", f"{QUALITY} --judge openai/judge {API}", rules=debatune_rules),
    # Debatrix judging and PanelBench
    Command(
        "judge-debatrix",
        f"judge --debates inputs/panelbench.jsonl --out judge/debatrix --judge openai/judge {API}",
        rules=judge_rules,
    ),
    Command(
        "judge-direct",
        f"judge --debates inputs/panelbench.jsonl --out judge/direct --framework direct "
        f"--judge openai/judge {API}",
        rules=judge_rules,
    ),
    Command(
        "judge-non-iterative",
        "judge --debates inputs/debates.json --out judge/non-iterative --framework non-iterative "
        f"--dimensions argument,clash --weights argument=2,clash=1 --report html "
        f"--judge openai/judge {API}",
        rules=judge_rules,
    ),
    Command(
        "eval-panelbench",
        "eval panelbench --predictions judge/debatrix judge/direct "
        "--gold $DATA/panelbench/debateart.jsonl --out eval/panelbench",
    ),
    # DebateQA and BERDS
    Command("index", "index --docs inputs/docs.jsonl --out qa/index --chunk-chars 1000"),
    Command("index-dense", "index --docs inputs/docs.jsonl --out qa/index-dense --dense"),
    Command("retrieve-bm25", f"retrieve {QA} --index qa/index --out qa/bm25/retrieved.jsonl -k 5"),
    Command(
        "retrieve-hybrid-mmr",  # MMR on the index's vectors
        f"retrieve {QA} --index qa/index-dense --retriever hybrid --mmr 0.5 -k 5 "
        "--out qa/hybrid-mmr/retrieved.jsonl",
    ),
    Command(
        "retrieve-bm25-mmr",  # MMR on an index without vectors: the candidates are encoded
        f"retrieve {QA} --index qa/index --mmr 0.7 -k 4 --out qa/bm25-mmr/retrieved.jsonl",
    ),
    Command(
        "retrieve-expansion",
        f"retrieve {QA} --index qa/index --query-expansion -k 3 "
        f"--out qa/expansion/retrieved.jsonl --model openai/scripted {CALL}",
        expect=1,  # one expansion is unreadable, one unscripted: recorded failures
        rules=EXPANSION,
    ),
    Command("answer-plain", f"answer {QA} --out qa/answer-plain {SCRIPTED}"),
    Command(
        "answer-rag",
        f"answer {QA} --out qa/answer-rag --mode rag --index qa/index -k 3 --prompt detailed "
        f"{SCRIPTED}",
    ),
    Command(
        "answer-react",
        f"answer {QA} --out qa/answer-react --mode react --index qa/index {SCRIPTED}",
        rules=REACT,
    ),
    Command(
        "curate",
        f"curate {QA} --docs qa/index --out qa/curate --documents 5 {SCRIPTED}",
        rules=CURATE,
    ),
    Command(
        "eval-da",
        f"eval da --answers qa/answer-plain/answers.jsonl --out qa/eval-da --judge openai/judge "
        f"{API}",
        rules=da_rules,
    ),
    Command(
        "eval-berds",
        "eval berds --retrieved qa/bm25/retrieved.jsonl --perspectives inputs/questions.jsonl "
        f"-k 3 --out qa/eval-berds --detector openai/detector {API}",
        rules=berds_rules,
    ),
    Command(
        "eval-detector",
        f"eval detector --pairs inputs/pairs.tsv --out qa/eval-detector --detector openai/detector "
        f"{API}",
        expect=1,  # the first pair gets an HTTP 500: an error record (retried by the rerun)
        rules=detector_rules,
        faults=[Fault("500", match="Statement: .*North Korea")],
    ),
    # CompQA
    Command("compare-s1", f"compare {CQ} --out compqa/s1 --scenario 1 {GPT}", rules=COMPARE),
    Command(
        "compare-s2",
        f"compare {CQ} --out compqa/s2 --scenario 2 --arguments inputs/compqa_arguments.jsonl "
        f"{GPT}",
        rules=COMPARE,
    ),
    Command("compare-s3", f"compare {CQ} --out compqa/s3 --scenario 3 {GPT}", rules=COMPARE),
    Command(
        "compare-s4",
        f"compare {CQ} --out compqa/s4 --scenario 4 --generate-arguments {GPT}",
        rules=COMPARE,
    ),
    Command(
        "compare-free-text",
        f"compare --questions inputs/compqa_free.txt --out compqa/free --scenario 3 "
        f"--generator free {GPT}",
        expect=1,  # one question's objects cannot be extracted: a parse failure
        rules=COMPARE,
    ),
    Command(
        "eval-compqa-0shot",
        f"eval compqa --answers {ANSWERS} --out compqa/judged0 --judge openai/judge {API}",
        rules=RUBRIC,
    ),
    Command(
        "eval-compqa-1shot",
        "eval compqa --answers inputs/gpt4_scenario_1.json --shots 1 --out compqa/judged1 "
        f"--judge openai/judge {API}",
        rules=RUBRIC,
    ),
    Command(
        "report-compqa",
        f"report compqa --judged {JUDGED} compqa/judged1/judged/gpt4_scenario_1.json "
        "--out compqa/report",
    ),
    Command(
        "report-compqa-human",
        f"report compqa --judged {GOLD}/gpt4_scenario_1.json {GOLD}/gpt3-5_scenario_1.json "
        "--human $DATA/compqa/evaluation_tables/dataset_hum1_evaluation.tsv "
        "--drop-out-of-range --by generator --out compqa/report-human",
    ),
    Command(
        "distill-compqa",
        f"data distill-compqa --judged {JUDGED} compqa/judged1/judged/gpt4_scenario_1.json "
        "--out compqa/distilled",
    ),
    Command(
        "distill-compqa-real",
        f"data distill-compqa --judged {GOLD}/cam.json {GOLD}/perplexity_scenario_2.json "
        "--min-score 12 --out compqa/distilled-real",
    ),
    Command(
        "data-mix",
        "data mix --in debate/generated compqa/distilled compqa/distilled-real "
        "--weights 2 1.5 0.5 --eval-fraction 0.2 --seed 1 --out mix",
    ),
    # training, then the trained model in process
    Command("train-sft", TRAIN),
    Command("train-merge", "train merge --adapter train/sft/adapter --out train/merged"),
    Command(
        "generate-local",
        "generate --dataset inputs/debate_test_arg.jsonl --model train/merged "
        "--out generate-local/responses.json --max-tokens 12 --concurrency 1 --quiet",
    ),
    Command("eval-pd", f"{PD} --out qa/pd-mean"),
    Command("eval-pd-released", f"{PD} --variant released --max-length 256 --out qa/pd-released"),
]
# reruns into the same folders, without the injected faults: finished work is skipped and
# failed work retried
RERUN = ["debate-generated", "debate-given", "eval-quality", "eval-detector", "train-sft"]
COMMANDS += [
    replace(c, name=f"rerun-{c.name}", expect=0, faults=[]) for c in COMMANDS if c.name in RERUN
]

# --------------------------------------------------------------------------------------------
# Fixtures


def read_jsonl(path: Path, lines: list[int] | None = None) -> list[dict]:
    """Records of a JSONL file (only the given 0-based lines when `lines` is set)."""
    rows = path.read_text(encoding="utf-8").splitlines()
    picked = rows if lines is None else [rows[i] for i in lines]
    return [json.loads(row) for row in picked if row.strip()]


def write_jsonl(path: Path, records: list[Any]) -> None:
    """Write records as JSONL."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def write_json(path: Path, value: Any) -> None:
    """Write a JSON file."""
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")


def write_fixtures(inputs: Path, data: Path, repo: Path) -> dict[str, Any]:
    """Write the input files; return the facts the scripted rules are built from."""
    inputs.mkdir(parents=True)
    write_json(inputs / "topics.json", ["Should zoos be banned?", "Is remote work better?"])
    debatune = data / "debatune"
    write_jsonl(
        inputs / "debate_test_arg.jsonl",
        read_jsonl(debatune / "Debate_topic_arguments" / "debate_test_v1_arg.jsonl", [0, 1]),
    )
    outputs = debatune / "model_outputs"
    ours = json.loads((outputs / "DEBATunE_7b" / "debate_test_arg_2048.json").read_text())[:6]
    baseline = json.loads((outputs / "Llama_2_7b_chat" / "debate_test_arg_2048.json").read_text())
    write_json(inputs / "debatune_7b.json", ours)
    write_json(inputs / "llama2_7b.json", baseline[:6])

    panelbench = read_jsonl(data / "panelbench" / "debateart.jsonl", [73, 84])
    write_jsonl(inputs / "panelbench.jsonl", panelbench)
    speeches = [
        ("Alice", "Zoos confine wild animals and cause them stress."),
        ("Bob", "Accredited zoos fund conservation and breeding programmes."),
        ("Alice", "Conservation can happen in the wild, without cages."),
        ("Bob", "Many species survive today only because zoos bred them."),
    ]
    moot_debates = [
        {
            "id": "zoos",
            "motion": "Zoos should be abolished",
            "pro": ["Alice"],
            "con": ["Bob"],
            "speeches": [{"speaker": s, "content": c} for s, c in speeches],
        },
        {
            "id": "homework",
            "motion": "Homework should be banned",
            "pro": ["Carol"],
            "con": ["Dan"],
            "info_slide": "Primary schools only.",
            "speeches": [
                {"speaker": "Carol", "content": "Children need time to play."},
                {"speaker": "Dan", "content": "Practice at home builds habits."},
            ],
        },
    ]
    write_json(inputs / "debates.json", moot_debates)

    answers = read_jsonl(data / "debateqa" / "demo_answers.jsonl")[:25]
    docs = [
        {"id": f"a{r['id']}", "title": f"Answer {r['id']}", "text": r["generation"]}
        for r in answers
    ]
    write_jsonl(inputs / "docs.jsonl", docs)
    questions = read_jsonl(data / "berds" / "dev_perspective_sets.jsonl", [0, 1, 2])
    write_jsonl(inputs / "questions.jsonl", questions)
    with (data / "berds" / "pers_det.test.tsv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))[:13]
    with (inputs / "pairs.tsv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows(rows)

    compqa = read_jsonl(data / "compqa" / "derived_questions.jsonl", [0, 1, 2])
    write_jsonl(inputs / "compqa_questions.jsonl", compqa)
    arguments = [
        {
            "object1": q["object1"],
            "object2": q["object2"],
            "aspect": q["aspect"],
            "arguments": {
                q["object1"]: [f"{q['object1']} is older than {q['object2']}."],
                q["object2"]: [
                    f"{q['object2']} is cheaper than {q['object1']}.",
                    f"{q['object2']} is easier to learn.",
                ],
            },
        }
        for q in compqa
    ]
    write_jsonl(inputs / "compqa_arguments.jsonl", arguments)
    (inputs / "compqa_free.txt").write_text(
        "What is better: Nike or Adidas? Focus on comfort.\nWhich is faster, a cheetah or a car?\n",
        encoding="utf-8",
    )
    raw = json.loads((data / "compqa" / "raw_summaries" / "gpt4_scenario_1.json").read_text())
    write_json(inputs / "gpt4_scenario_1.json", raw[:2])
    shutil.copyfile(repo / "examples" / "train-tiny.yaml", inputs / "train-tiny.yaml")
    return {"ours": ours, "panelbench": panelbench, "questions": questions, "pairs": rows[1:]}


# --------------------------------------------------------------------------------------------
# Normalisation and digests


@dataclass
class Setup:
    """Where a recording runs: its folders, the server port and the facts the rules use."""

    work: Path
    repo: Path
    data: Path
    port: int
    facts: dict[str, Any] = field(default_factory=dict)


class Normaliser:
    """Replaces the run's volatile parts in texts and files."""

    def __init__(self, setup: Setup, api: str):
        """Placeholders for the server URL and the folders of this machine."""
        self.places = [
            (api, "<API>"),
            (str(setup.work), "<WORK>"),
            (sys.prefix, "<VENV>"),
            (str(setup.repo), "<REPO>"),
            (str(setup.data), "<DATA>"),
        ]

    def text(self, value: str) -> str:
        """A text with the placeholders in."""
        for real, placeholder in self.places:
            value = value.replace(real, placeholder)
        return value

    def stream(self, value: str) -> str:
        """Normalise stdout or stderr: placeholders in, durations blanked."""
        value = self.text(value)
        for pattern, replacement in VOLATILE_PATTERNS:
            value = re.sub(pattern, replacement, value)
        return value

    def file_digest(self, path: Path, relpath: str) -> str:
        """SHA-256 of a file's normalised content (raw bytes unless it is UTF-8 text)."""
        raw = path.read_bytes()
        try:
            text = self.text(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return hashlib.sha256(raw).hexdigest()
        if path.suffix in (".json", ".jsonl"):
            text = canonical_json(text, relpath, lines=path.suffix == ".jsonl")
        elif any(fnmatch.fnmatch(relpath, glob) for glob, _ in SORTED_FRONT_MATTER):
            text = sort_front_matter(text)
        for glob, pattern, replacement, _ in VOLATILE_TEXT:
            if fnmatch.fnmatch(relpath, glob):
                text = re.sub(pattern, replacement, text)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def matching(rules: tuple, relpath: str) -> list[tuple]:
    """The rules (file glob first) that apply to a file."""
    return [rule for rule in rules if fnmatch.fnmatch(relpath, rule[0])]


def normalise_json(value: Any, relpath: str, path: str = "") -> Any:
    """A parsed JSON value without its volatile fields (`path`: where `value` sits)."""

    def here(key: object) -> str:
        return f"{path}.{key}" if path else str(key)

    if isinstance(value, dict):
        dropped = [name for _, name, _ in matching(VOLATILE_FIELDS, relpath)]
        return {
            k: normalise_json(v, relpath, here(k))
            for k, v in value.items()
            if not any(fnmatch.fnmatchcase(here(k), name) for name in dropped)
        }
    if isinstance(value, list):
        items = [normalise_json(v, relpath, here(i)) for i, v in enumerate(value)]
        if any(path == name for _, name, _ in matching(SORTED_FIELDS, relpath)):
            items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return items
    if isinstance(value, str):
        for _, name, pattern, replacement, _ in matching(VOLATILE_VALUES, relpath):
            if fnmatch.fnmatchcase(path, name):
                value = re.sub(pattern, replacement, value)
    return value


def canonical_json(text: str, relpath: str, *, lines: bool) -> str:
    """JSON or JSONL re-serialised with sorted keys, without volatile fields."""
    out = []
    for chunk in text.splitlines() if lines else [text]:
        if not chunk.strip():
            continue
        try:
            value = normalise_json(json.loads(chunk), relpath)
        except ValueError:
            out.append(chunk)  # a torn line stays as it is
            continue
        out.append(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(out)


def sort_front_matter(text: str) -> str:
    """Sort each run of `- item` lines in the YAML front matter of a Markdown file."""
    lines = text.split("\n")
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        return text
    end = lines.index("---", 1)
    head, run = [], []
    for line in [*lines[1:end], ""]:
        if line.startswith("- "):
            run.append(line)
            continue
        head += sorted(run)
        run = []
        head.append(line)
    return "\n".join(["---", *head[:-1], *lines[end:]])


def skip_reason(relpath: str) -> str | None:
    """Why a file is not compared bytewise, or None."""
    for pattern, reason in SKIPPED:
        if fnmatch.fnmatch(relpath, pattern) or fnmatch.fnmatch(Path(relpath).name, pattern):
            return reason
    return None


def digest_outputs(work: Path, output: str, normaliser: Normaliser) -> dict[str, str]:
    """Relative path → normalised SHA-256 (or `skipped: <reason>`) of each file in `output`."""
    files: dict[str, str] = {}
    for path in sorted(p for p in (work / output).rglob("*") if p.is_file()):
        relpath = path.relative_to(work).as_posix()
        reason = skip_reason(relpath)
        files[relpath] = f"skipped: {reason}" if reason else normaliser.file_digest(path, relpath)
    return files


# --------------------------------------------------------------------------------------------
# record


def moot_env(work: Path) -> dict[str, str]:
    """The environment of every command: offline, one thread, no keys, caches in the work dir."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        OMP_NUM_THREADS="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        MOOT_CACHE_DIR=str(work / "moot-cache"),
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def find_repo() -> Path:
    """The source tree of the `moot` that `sys.executable` imports (it holds examples/)."""
    spec = importlib.util.find_spec("moot")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("moot is not importable by this interpreter")
    return Path(next(iter(spec.submodule_search_locations))).resolve().parent


def run_moot(argv: list[str], work: Path) -> tuple[int, str, str]:
    """Run `moot` in `work`; a command over `TIMEOUT` gets exit code -1 (the harness goes on)."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "moot", *argv],
            cwd=work,
            env=moot_env(work),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        out, err = (
            x.decode() if isinstance(x, bytes) else x or "" for x in (exc.stdout, exc.stderr)
        )
        return -1, out, err + f"\n[golden] timed out after {TIMEOUT}s\n"
    return result.returncode, result.stdout, result.stderr


def run_command(index: int, command: Command, setup: Setup) -> dict[str, Any]:
    """Run one command against a fresh scripted server; return its digest entry."""
    rules = command.rules(setup.facts) if callable(command.rules) else command.rules
    config = ServerConfig(rules=list(rules), faults=list(command.faults))
    with ScriptedServer(config, port=setup.port) as server:
        values = {
            "$API": server.url,
            "$CACHE": f"cache-{index:02d}.sqlite",
            "$DATA": str(setup.data),
        }
        argv = [substitute(word, values) for word in shlex.split(command.args)]
        started, cpu = time.monotonic(), children_cpu()
        code, stdout, stderr = run_moot(argv, setup.work)
        seconds, cpu = time.monotonic() - started, children_cpu() - cpu
        normaliser = Normaliser(setup, server.url)
    entry = {
        "name": command.name,
        "argv": [normaliser.text(a) for a in argv],
        "exit_code": code,
        "expected_exit_code": command.expect,
        "stdout": normaliser.stream(stdout),
        "stderr": normaliser.stream(stderr),
        "files": digest_outputs(setup.work, command.output, normaliser),
    }
    flag = "" if code == command.expect else f"  UNEXPECTED (expected {command.expect})"
    print(
        f"[{index:2d}] {command.name:24s} exit {code:2d} {seconds:6.1f}s ({cpu:5.1f}s cpu) "
        f"{len(entry['files']):3d} files{flag}",
        flush=True,
    )
    return entry | {"seconds": round(seconds, 1), "cpu": round(cpu, 1)}


def substitute(word: str, values: dict[str, str]) -> str:
    """A command-line word with its `$NAME` placeholders filled in."""
    for name, value in values.items():
        word = word.replace(name, value)
    return word


def children_cpu() -> float:
    """CPU seconds used so far by finished child processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def record(args: argparse.Namespace) -> int:
    """Run the command table into a fresh work folder and write the digest."""
    repo = (args.repo or find_repo()).resolve()
    setup = Setup(args.work.resolve(), repo, args.data.resolve(), args.port)
    shutil.rmtree(setup.work, ignore_errors=True)
    setup.work.mkdir(parents=True)
    setup.facts = write_fixtures(setup.work / "inputs", setup.data, setup.repo)
    started = time.monotonic()
    entries = []
    for index, command in enumerate(COMMANDS):
        if args.only and command.name not in args.only:
            continue
        entries.append(run_command(index, command, setup))
    total = time.monotonic() - started
    digest = {
        "commands": [{k: v for k, v in e.items() if k not in ("seconds", "cpu")} for e in entries],
        "volatile_keys": [f"{f}: {k} ({why})" for f, k, why in VOLATILE_FIELDS],
        "volatile_values": [
            f"{f}: {k} ~ s/{p}/{r}/ ({why})" for f, k, p, r, why in VOLATILE_VALUES
        ],
        "sorted_lists": [f"{f}: {k} ({why})" for f, k, why in SORTED_FIELDS]
        + [f"{f}: front matter ({why})" for f, why in SORTED_FRONT_MATTER]
        + [f"{f}: s/{p}/{r}/ ({why})" for f, p, r, why in VOLATILE_TEXT],
        "volatile_stream_patterns": [f"s/{p}/{r}/" for p, r in VOLATILE_PATTERNS],
        "skipped": [f"{p} ({why})" for p, why in SKIPPED],
        "placeholders": ["<API>", "<WORK>", "<VENV>", "<REPO>", "<DATA>"],
        "skipped_files": sorted(
            {path for e in entries for path, value in e["files"].items() if value[:8] == "skipped:"}
        ),
        "timing": {"total_seconds": round(total, 1), "total_cpu_seconds": round(children_cpu(), 1)}
        | {e["name"]: [e["seconds"], e["cpu"]] for e in entries},
    }
    args.digest.parent.mkdir(parents=True, exist_ok=True)
    args.digest.write_text(json.dumps(digest, indent=1, ensure_ascii=False) + "\n")
    unexpected = [e["name"] for e in entries if e["exit_code"] != e["expected_exit_code"]]
    cpu = children_cpu()
    print(f"recorded {len(entries)} commands in {total:.0f}s ({cpu:.0f}s cpu) to {args.digest}")
    if unexpected:
        print("unexpected exit codes: " + ", ".join(unexpected))
    return 0


# --------------------------------------------------------------------------------------------
# compare


NORMALISATION = (
    "volatile_keys",
    "volatile_values",
    "sorted_lists",
    "volatile_stream_patterns",
    "skipped",
)


def command_differences(x: dict, y: dict) -> tuple[list[str], list[str]]:
    """Differences of one command between two digests: (files and exit code, the rest)."""
    serious, minor = [], []
    if x["exit_code"] != y["exit_code"]:
        serious.append(f"exit code {x['exit_code']} -> {y['exit_code']}")
    xf, yf = x["files"], y["files"]
    for path in sorted(set(xf) | set(yf)):
        if path not in yf:
            serious.append(f"removed {path}")
        elif path not in xf:
            serious.append(f"added {path}")
        elif xf[path] != yf[path]:
            serious.append(f"changed {path}")
    if x["argv"] != y["argv"]:
        minor.append("argv differs:\n" + text_diff(" ".join(x["argv"]), " ".join(y["argv"])))
    for stream in ("stdout", "stderr"):
        if x[stream] != y[stream]:
            minor.append(f"{stream} differs:\n{text_diff(x[stream], y[stream])}")
    return serious, minor


def compare(args: argparse.Namespace) -> int:
    """Print the differences between two digests; exit 1 if a file or an exit code differs."""
    a, b = (json.loads(path.read_text()) for path in (args.a, args.b))
    old = {c["name"]: c for c in a["commands"]}
    new = {c["name"]: c for c in b["commands"]}
    serious: dict[str, list[str]] = {}
    minor: dict[str, list[str]] = {}
    for name in [*old, *(n for n in new if n not in old)]:
        if name not in new or name not in old:
            serious[name] = [f"only in {args.a if name in old else args.b}"]
            continue
        serious[name], minor[name] = command_differences(old[name], new[name])
    minor["normalisation"] = [f"{key} differs" for key in NORMALISATION if a.get(key) != b.get(key)]
    report("files and exit codes", serious)
    report("stdout, stderr and argv (lower priority)", minor)
    return 1 if any(serious.values()) else 0


def report(title: str, differences: dict[str, list[str]]) -> None:
    """Print differences grouped by command."""
    count = sum(map(len, differences.values()))
    print(f"{title}: {count} difference(s)")
    for name, lines in differences.items():
        if lines:
            print(f"  {name}:")
            for line in lines:
                print("    " + line.replace("\n", "\n      "))


def text_diff(x: str, y: str, limit: int = 12) -> str:
    """A short unified diff of two texts."""
    lines = list(difflib.unified_diff(x.splitlines(), y.splitlines(), lineterm="", n=0))[2:]
    more = f"\n... {len(lines) - limit} more line(s)" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run `record` or `compare`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record", help="run the commands and write a digest")
    rec.add_argument("--work", type=Path, required=True, help="work folder (deleted first)")
    rec.add_argument("--digest", type=Path, required=True, help="digest JSON to write")
    rec.add_argument("--data", type=Path, default=DATA, help="the shared paper data")
    rec.add_argument("--repo", type=Path, help="the tree under test (default: moot's)")
    rec.add_argument("--port", type=int, default=PORT, help="scripted server port")
    rec.add_argument("--only", nargs="*", help="run only these commands (debugging)")
    cmp = sub.add_parser("compare", help="compare two digests")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    return record(args) if args.action == "record" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
