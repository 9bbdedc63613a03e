"""Debatrix pieces: frameworks, dimensions, prompts (the released texts) and winner validation."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment
from pydantic import ValidationError

from moot.agents.debatrix_judges import (
    FRAMEWORKS,
    CommentedScore,
    Score,
    analysis_messages,
    choose_dimensions,
    dimension_library,
    judgment_messages,
    released_fix,
    winner_schema,
)
from moot.cli.debatrix import FRAMEWORK_NAMES
from moot.core.data.debates import Debate, Speech
from moot.core.errors import ConfigError
from moot.core.llm.structured import schema_text
from moot.prompts import render

DEBATE = Debate(
    "d1",
    "Zoos should be abolished",
    ("Alice",),
    ("Bob",),
    (Speech("Alice", "Zoos confine animals."), Speech("Bob", "Zoos protect species.")),
    info_slide="Background.",
)


def test_the_cli_offers_every_framework():
    assert set(FRAMEWORK_NAMES) == set(FRAMEWORKS)


def test_dimensions_default_to_the_papers_with_its_weights_and_ties():
    dims = choose_dimensions(FRAMEWORKS["debatrix"], "1v1")
    assert [(d.name, d.weight, d.allow_tie) for d in dims] == [
        ("argument", 3, False),
        ("source", 2, True),
        ("language", 2, True),
    ]
    bp = choose_dimensions(FRAMEWORKS["debatrix"], "bp")
    assert [d.name for d in bp] == ["argument", "support", "clash", "language"]
    assert [d.name for d in choose_dimensions(FRAMEWORKS["direct"], "1v1")] == ["general"]


def test_weights_override_and_bad_dimensions_fail():
    dims = choose_dimensions(FRAMEWORKS["dimensional"], "1v1", ["argument", "clash"], {"clash": 2})
    assert [(d.name, d.weight) for d in dims] == [("argument", 3), ("clash", 2)]
    with pytest.raises(ConfigError, match="unknown 1v1 dimension 'support'"):
        choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["support"])
    with pytest.raises(ConfigError, match="not among --dimensions"):
        choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["argument"], {"source": 1})
    with pytest.raises(ConfigError, match="positive weight"):
        choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["argument"], {"argument": 0})


def test_only_debaters_and_allowed_ties_are_winners():
    with_tie, without = winner_schema(DEBATE, True), winner_schema(DEBATE, False)
    assert with_tie.model_validate({"winner": " bob."}).winner == "Bob"
    assert with_tie.model_validate({"winner": "It's a tie!"}).winner == "tie"
    for schema, value in ((without, "tie"), (with_tie, "Carol"), (with_tie, "pro")):
        with pytest.raises(ValidationError):
            schema.model_validate({"winner": value})
    assert without.model_json_schema()["properties"]["winner"]["enum"] == ["Alice", "Bob"]


def test_prompts_carry_memory_sections_and_the_tie_rule():
    (argument,) = choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["argument"])
    first = analysis_messages(DEBATE, argument, 0, [], analyses=True)
    assert "Also, you" not in first[0]["content"]  # no earlier speeches yet
    second = analysis_messages(DEBATE, argument, 1, [("Analysis of Speech 1", "A1")], True)
    assert "you have analyzed all previous speeches" in second[0]["content"]
    assert second[1]["content"].index("# Analysis of Speech 1") < second[1]["content"].index(
        "# New Speech by Bob"
    )
    judged = judgment_messages(DEBATE, argument, [("Analysis of Speech 1", "A1")], True)
    assert "Ties are not allowed" in judged[0]["content"]
    assert "Info Slide" not in judged[1]["content"]  # analyses replace the transcript
    assert "\n\n\n" not in judged[0]["content"]


# --- the released texts, word for word (MIT): ljcleo/debatrix@c419d8a

#: PanelBench/debatrix_config/BP-Competition/dimension.yml:1-97, the whole file.
RELEASED_BP_DIMENSIONS = r"""- name: argument
  weight: 1
  allow_tie: true
  prompt:
    judge_debate: You are assigned to assess the argument frameworks in the debate. First, for each debater, summarize their arguments, especially unique ones, and whether they are on topic and logically sound. Next, for each debater, assess whether their argument framework is complete and coherent. Finally, compare their argument frameworks.
    analyze_speech: You are assigned to assess the argument frameworks in the debate. First, list the arguments and counter-arguments in the new speech. Next, analyze whether they are on topic and logically sound.
    use_previous: Check whether all arguments on the debater's side are coherent, and what arguments are unique in this speech.
    judge_by_analysis: You are assigned to assess the argument frameworks in the debate. First, for each debater, summarize their arguments, especially unique ones, and whether they are on topic and logically sound. Next, for each debater, assess whether their argument framework is complete and coherent. Finally, compare their argument frameworks.
- name: support
  weight: 1
  allow_tie: true
  prompt:
    judge_debate: You are assigned to assess the supporting analysis of arguments in the debate. First, for each debater, summarie their arguments, especially how they are supported. Next, for each debater, assess whether their supporting materials are credible and sufficient within the greater context of the debate. Finally, compare their supporting analyses.
    analyze_speech: You are assigned to assess the supporting analysis of arguments in the debate. First, list the arguments and counter-arguments in the new speech. Next, analyze whether they are supported by empirical evidence, logical mechanism or moral intuitions, and whether their supporting materials are credible and sufficient.
    use_previous: ""
    judge_by_analysis: You are assigned to assess the supporting analysis of arguments in the debate. First, for each debater, summarie their arguments, especially how they are supported. Next, for each debater, assess whether their supporting materials are credible and sufficient within the greater context of the debate. Finally, compare their supporting analyse.
- name: clash
  weight: 1
  allow_tie: true
  prompt:
    judge_debate: You are assigned to assess the clashes in the debate. First, for each debater, summarie their arguments, especially how debaters on the same half (OG vs OO, CG vs CO) refute against each other. Next, analyze the clashes in the debate, summarizing the key point of the clash and what arguments are made, comparing the relative argument strength in each clash, and judging whether the clash is a tie or someone is more persuasive. Finally, compare their performance in all clashes.
    analyze_speech: You are assigned to assess the clashes in the debate. First, list the arguments and counter-arguments in the new speech.
    use_previous: Next, list what clashes the speech involves. Finally, if the opponent on the same half (OG vs OO, CG vs CO) has offered their arguments, check how they refute against each other.
    judge_by_analysis: You are assigned to assess the clashes in the debate. First, for each debater, summarie their arguments, especially how debaters on the same half (OG vs OO, CG vs CO) refute against each other. Next, analyze the clashes in the debate, summarizing the key point of the clash and what arguments are made, comparing the relative argument strength in each clash, and judging whether the clash is a tie or someone is more persuasive. Finally, compare their performance in all clashes.
- name: language
  weight: 1
  allow_tie: true
  prompt:
    judge_debate: You are assigned to assess the language style in the debate. First, for each debater, analyze whether the speech is comprehensible, clearly and precisely convey the debater's meaning, and effectively convey the significance of the debater’s claim. Informal and/or aggressive/confrontational language is often used to make speeches more vivid, confident and engaging, but the debaters must respect each other; unsportsmanlike or toxic behavior like personal insult is unacceptable. Finally, compare their language style.
    analyze_speech: You are assigned to assess the language style in the debate. Analyze whether the speech is comprehensible, clearly and precisely convey the debater’s meaning, and effectively convey the significance of the debater’s claim. Informal and/or aggressive/confrontational language is often used to make speeches more vivid, confident and engaging, but the debaters must respect each other; unsportsmanlike or toxic behavior like personal insult is unacceptable.
    use_previous: ""
    judge_by_analysis: You are assigned to assess the language style in the debate. Summarize the language style of each debater and compare them.
- name: general
  weight: 0
  allow_tie: false
  prompt:
    judge_debate: |
      Please judge the debate by assessing which debater is most persuasive. Think critically and apply the following steps:

      1. Summarize each debater's speeches, including their arguments and supporting analyses. Quote highlights when necessary.

      2. Compare each debater's arguments on these criteria:

        - whether the arguments are on topic
        - whether the arguments are logically sound and consistent
        - whether the argument framework is complete
        - whether the supporting analyses are truthful and rigorous
        - whether the rebuttals are effective (only consider rebuttals between OG and OO, and rebuttals between CG and CO)

        Specifically:

        - OG and OO are not responsible for CO and CG's arguments and rebuttals; their arguments remain strong if the stronger part is not challenged by CO or CG.
        - CG and CO can only be credited for contributions to the debate that go beyond what has already been contributed by OG or OO respectively.
        - any new arguments in speeches 7 and 8 should be ignored; CG and CO cannot solely use them to win the clash.

      3. List the clashes in the debate between both sides and analyze them. For each clash, first summarize the key point of the clash and what arguments are made, and then analyze the relative strength of them; finally, judge whether the clash is a tie or someone is more persuasive.

        Specifically:

        - OG and OO are not responsible for CO and CG's arguments and rebuttals; their arguments remain strong if the stronger part is not challenged by CO or CG.
        - CG and CO can only be credited for contributions to the clash that go beyond what has already been contributed by OG or OO respectively.
        - any new arguments in speeches 7 and 8 should be ignored; CG and CO cannot solely use them to win the clash.

      4. Compare each debater's language style. This includes whether they are comprehensible, whether they clearly and precisely convey their meanings, and whether they effectively convey the significance of their claims. Note that in oral competitive debates, informal and/or aggressive/confrontational language is often used to make speeches more vivid, confident and engaging; however, toxic behavior like personal insult should be punished.
    analyze_speech: |
      Please provide a detailed summary of the new speech, according to its role. Specifically, if the new speech is speech 1, how the motion is defined; if the new speech is speech 5 or 6, what extensions are provided; if the new speech is speech 7 or 8, how the debate is summarized.

      You need to list the arguments one by one along with their supporting analyses. Quote highlights when necessary.

      After the list of arguments, write a short paragraph to summarize the language style: whether they are comprehensible, whether they clearly and precisely convey their meanings, and whether they effectively convey the significance of their claims. Note that in oral competitive debates, informal and/or aggressive/confrontational language is often used to make speeches more vivid, confident and engaging; however, toxic behavior like personal insult should be punished.
    use_previous: To clarify arguments already made in the debate, you should refer to previous speeches; you also need to report whether the new speech involves in any clashes, and which arguments in the speech are relevant to each clash.
    judge_by_analysis: |
      Please judge the debate by assessing which debater is most persuasive. Think critically and apply the following steps:

      1. Compare each debater's arguments on these criteria:

        - whether the arguments are on topic
        - whether the arguments are logically sound and consistent
        - whether the argument framework is complete
        - whether the supporting analyses are truthful and rigorous
        - whether the rebuttals are effective (only consider rebuttals between OG and OO, and rebuttals between CG and CO)

        Specifically:

        - OG and OO are not responsible for CO and CG's arguments and rebuttals; their arguments remain strong if the stronger part is not challenged by CO or CG.
        - CG and CO can only be credited for contributions to the debate that go beyond what has already been contributed by OG or OO respectively.
        - any new arguments in speeches 7 and 8 should be ignored; CG and CO cannot solely use them to win the clash.

      2. List the clashes in the debate between both sides and analyze them. For each clash, first summarize the key point of the clash and what arguments are made, and then analyze the relative strength of them; finally, judge whether the clash is a tie or someone is more persuasive.

        Specifically:

        - OG and OO are not responsible for CO and CG's arguments and rebuttals; their arguments remain strong if the stronger part is not challenged by CO or CG.
        - CG and CO can only be credited for contributions to the clash that go beyond what has already been contributed by OG or OO respectively.
        - any new arguments in speeches 7 and 8 should be ignored; CG and CO cannot solely use them to win the clash.

      3. Compare each debater's language style. This includes whether they are comprehensible, whether they clearly and precisely convey their meanings, and whether they effectively convey the significance of their claims. Note that in oral competitive debates, informal and/or aggressive/confrontational language is often used to make speeches more vivid, confident and engaging; however, toxic behavior like personal insult should be punished.
"""  # noqa: E501

#: PanelBench/debatrix_config/DebateArt/dimension.yml:1-32, the whole file (the same text as
#: preset/example/config/dimension.yml:1-32).
RELEASED_1V1_DIMENSIONS = r"""- name: argument
  weight: 3
  allow_tie: false
  prompt:
    judge_debate: Please summarize the use of arguments of each debater in the debate and compare them. This includes what arguments are made, whether they are on topic and sound, whether their backing premises and logic are clear and reasonable, whether they are supported by credible evidence, whether the language is appropriate, and whether the counterarguments provide effective refutation against the opponent or fail to respond to some arguments from the opponent. Also analyze the relative strength between each debater's argument sets, and their impacts against each other, by analyzing the clashes between both side's argument sets, comparing the relative strength between sides critically and logically. Award the debater that, within the context of the debate, affirms (for pro) or negates (for con) the resolution the best.
    analyze_speech: Please provide references of the use of arguments in the new speech. This includes what arguments are made, whether they are on topic and sound, whether their backing premises and logic are clear and reasonable, whether they are supported by credible evidence, and whether the language is appropriate.
    use_previous: To clarify arguments already made in the debate, you should refer to previous speeches; you need to report whether the counterarguments provide effective refutation against the opponent, or whether it fails to respond to some arguments from the opponent. In addition, analyze the clashes between both side's argument sets; for each clash, think critically and logically to compare the relative strength between sides.
    judge_by_analysis: First, for each debater, summarize their use of arguments in ALL their debates, according to the given argument analyses. Next, analyze the relative strength between each debater's argument sets, and their impacts against each other; also analyze the clashes between both side's argument sets, comparing the relative strength between sides critically and logically. Award the debater that, within the context of the debate, affirms (for pro) or negates (for con) the resolution the best.
- name: source
  weight: 2
  allow_tie: true
  prompt:
    judge_debate: Please summarize the use of sources of each debater in the debate and compare them. This includes what relevant outside evidence is used, and how they are used to support the arguments. If all of the debaters do their research due diligence, or the quantity difference of external sources is not large (even if one debater uses one external sources while another uses none), they are tied; otherwise, award the debater that, with a strong quality lead, better supports their side's case with external sources. Note that unreliable sources, if enough to diminish their own case, should receive a penalty.
    analyze_speech: Please provide references of the use of sources in the new speech. This includes what outside evidence is used, whether their sources are credible, and how they are used to support the arguments. Note that sources providing common knowledge or are the subject of the debate DO NOT count as a valid external source; you should think critically and analyze the references to EXCLUDE such sources. Lack of evidence, evidence with unreliable sources, or source spam without relevant analysis should be reported; however, if the arguments can firmly be based on common knowledge without actually needing extra sources, the speech should not be criticized as lacking evidence.
    use_previous: To clarify quotes across speeches, especially the ones related to previous sources from either side, you should refer to previous speeches; you need to distinguish these quotes from normal sections.
    judge_by_analysis: First, for each debater, summarize their use of sources in ALL their speeches, according to the given source analyses. Next, compare the use of sources between debaters. If all of the debaters do their research due diligence, or the quantity difference of external sources is not large (even if one debater uses one external sources while another uses none), they are tied; otherwise, award the debater that, with a strong quality lead, better supports their side's case with external sources. Note that unreliable sources, if enough to diminish their own case, should receive a penalty.
- name: language
  weight: 2
  allow_tie: true
  prompt:
    judge_debate: Please summarize the use of language of each debater in the debate. This includes sections that affects the clarity level and the conduct level. Informal language and/or aggressive tone are allowed to attract the audience; do not punish the debater because of such language use. However, extremely illegible paragraphs and extremely unsportsmanlike or outright toxic behaviors like repeated personal insults should receive a penalty. Finally, if one debater deserves a penalty, award the other one (unless all debaters are penalized); otherwise announce that they are tied.
    analyze_speech: Please provide references of the use of language in the new speech. This includes sections that affects the clarity level and the conduct level. Informal language and/or aggressive tone are allowed to attract the audience; do not punish the debater because of such language use. However, extremely illegible paragraphs and extremely unsportsmanlike or outright toxic behaviors like repeated personal insults should receive a penalty.
    use_previous: To clarify quotes across speeches, especially the ones that criticize inappropriate language in their opponent's speeches, you should refer to previous speeches; you need to distinguish these quotes from normal sections.
    judge_by_analysis: First, for each debater, summarize their use of language in ALL their speeches, according to the given language analyses. Informal language and/or aggressive tone are allowed to attract the audience; do not punish the debater because of such language use. However, extremely illegible paragraphs and extremely unsportsmanlike or outright toxic behaviors like repeated personal insults should receive a penalty. Finally, if one debater deserves a penalty, award the other one (unless all debaters are penalized); otherwise announce that they are tied.
- name: general
  weight: 0
  allow_tie: false
  prompt:
    judge_debate: Please summarize the use of arguments, sources and language of each debater in the debate and compare them. This includes what arguments are made, whether they are on topic and sound, whether their backing premises and logic are clear and reasonable, whether the counterarguments provide effective refutation against the opponent or fail to respond to some arguments from the opponent, what outside evidence is used, whether their sources are credible, how they are used to support the arguments, and sections that affects the clarity level and the conduct level. Also analyze the relative strength between each debater's argument sets, and their impacts against each other, by analyzing the clashes between both side's argument sets, comparing the relative strength between sides critically and logically. You also need to consider their sources and language as well when analyzing argument strength; report lacking or unreliable sources, extremely illegible paragraphs and extremely unsportsmanlike or outright toxic behaviors, and think critically of whether they are really weakening the arguments. Award the debater that, within the context of the debate, affirms (for pro) or negates (for con) the resolution the best.
    analyze_speech: Please provide references of how the debater argues in the new speech. This includes what arguments are made, whether they are on topic and sound, whether their backing premises and logic are clear and reasonable, whether the counterarguments provide effective refutation against the opponent or fail to respond to some arguments from the opponent, what outside evidence is used, whether their sources are credible, how they are used to support the arguments, and sections that affects the clarity level and the conduct level. Lack of evidence, evidence with unreliable sources, source spam without relevant analysis, extremely illegible paragraphs and extremely unsportsmanlike or outright toxic behaviors should be reported; however, you need to think critically of whether they are really weakening the arguments.
    use_previous: To clarify arguments already made in the debate and quotes across speech, you should refer to previous speeches; you need to distinguish quotes from normal sections. You also need to report whether the counterarguments provide effective refutation against the opponent, or whether it fails to respond to some arguments from the opponent. In addition, analyze the clashes between both side's argument sets; for each clash, think critically and logically to compare the relative strength between sides.
    judge_by_analysis: First, for each debater, summarize their use of arguments, sources and language in ALL their debates, according to the given analyses. Next, analyze the relative strength between each debater's argument sets, and their impacts against each other; also analyze the clashes between both side's argument sets, comparing the relative strength between sides critically and logically. You need to consider their sources and language as well when analyzing argument strength. Award the debater that, within the context of the debate, affirms (for pro) or negates (for con) the resolution the best.
"""  # noqa: E501

#: preset/example/config/panel.yml:2-10 (`parser_config.schema_prompt_template`), dedented; the
#: same lines in PanelBench/debatrix_config/{DebateArt,BP-Competition}/panel.yml.
RELEASED_FORMAT_INSTRUCTIONS = r"""The output should be formatted as a JSON instance that conforms to the JSON schema below.

As an example, for the schema {"properties": {"foo": {"title": "Foo", "description": "a list of strings", "type": "array", "items": {"type": "string"}}}, "required": ["foo"]}, the object {"foo": ["bar", "baz"]} is a well-formatted instance of the schema. The object {"properties": {"foo": ["bar", "baz"]}} is not well-formatted.

Here is the output schema:
```
{{ schema }}
```
"""  # noqa: E501

#: preset/example/config/panel.yml:11-27 (`parser_config.fix_prompt_template`), dedented; the
#: same lines in PanelBench/debatrix_config/{DebateArt,BP-Competition}/panel.yml.
RELEASED_FIX_PROMPT = r"""Instructions:
--------------
{{ instructions }}
--------------
Completion:
--------------
{{ completion }}
--------------

Above, the Completion did not satisfy the constraints given in the Instructions.
Error:
--------------
{{ error }}
--------------

Please try again. Please only respond with an answer that satisfies the constraints laid out in the Instructions:
"""  # noqa: E501


def released_render(template: str, **variables: str) -> str:
    """`template` filled as the release fills it (debatrix/panel/interface/common/util.py:7-8)."""
    environment = SandboxedEnvironment(undefined=StrictUndefined)
    return environment.from_string(template).render(**variables)


#: Per format: the released file, moot's own dimensions beside it, and the released slips kept
#: (dimension, prompt, words, how often), so a corrected copy above fails too.
RELEASED_DIMENSIONS = {
    "bp": (
        RELEASED_BP_DIMENSIONS,
        (),
        (
            ("general", "judge_by_analysis", "\n  Specifically:\n\n  - OG and OO", 2),
            ("clash", "judge_debate", "summarie their", 1),
            ("support", "judge_by_analysis", "compare their supporting analyse.", 1),
        ),
    ),
    "1v1": (
        RELEASED_1V1_DIMENSIONS,
        ("clash",),
        (
            ("argument", "judge_by_analysis", "in ALL their debates,", 1),
            ("general", "judge_by_analysis", "in ALL their debates,", 1),
            ("source", "judge_debate", "one external sources while", 1),
            ("source", "judge_by_analysis", "one external sources while", 1),
            ("language", "judge_debate", "sections that affects", 1),
            ("language", "analyze_speech", "sections that affects", 1),
            ("general", "judge_debate", "sections that affects", 1),
            ("general", "analyze_speech", "sections that affects", 1),
            ("general", "use_previous", "quotes across speech,", 1),
        ),
    ),
}


@pytest.mark.parametrize("debate_format", list(RELEASED_DIMENSIONS))
def test_the_dimensions_are_the_released_texts_typos_and_layout_kept(debate_format):
    text, own, slips = RELEASED_DIMENSIONS[debate_format]
    released = yaml.safe_load(text)
    shipped = dimension_library(debate_format)
    assert [name for name in shipped if name not in own] == [d["name"] for d in released]
    for dimension in released:
        assert dataclasses.asdict(shipped[dimension["name"]]) == {
            "name": dimension["name"],
            "weight": dimension["weight"],
            "allow_tie": dimension["allow_tie"],
            **dimension["prompt"],
        }
    for name, prompt, words, times in slips:
        assert getattr(shipped[name], prompt).count(words) == times, (name, prompt, words)


def test_the_schemas_a_judge_is_shown_are_worded_as_released():
    """The fix prompt quotes the schema: the release's titles and descriptions (ljcleo/debatrix@
    c419d8a:debatrix/panel/interface/common/verdict.py:14-24), no docstring of ours; moot adds
    the paper's 1-10 range and the debaters' names, and asks for `comment` where the release's
    JudgmentAndScore says `judgment` (moot's answer format, docs/faithfulness.md)."""
    score = {"description": "a score for the debater", "title": "Score", "type": "integer"}
    ranged = score | {"minimum": 1, "maximum": 10}
    assert json.loads(schema_text(Score)) == {
        "properties": {"score": ranged},
        "required": ["score"],
        "title": "Score for Specific Debater",
        "type": "object",
    }
    comment = {"description": "judgment for the debater", "title": "Comment", "type": "string"}
    assert json.loads(schema_text(CommentedScore)) == {
        "properties": {"comment": comment, "score": ranged},
        "required": ["comment", "score"],
        "title": "Judgment and Score for Specific Debater",
        "type": "object",
    }
    winner = {"description": "the final winner of the debate", "title": "Winner"}
    assert json.loads(schema_text(winner_schema(DEBATE, allow_tie=False))) == {
        "properties": {"winner": winner | {"enum": ["Alice", "Bob"], "type": "string"}},
        "required": ["winner"],
        "title": "Winner of Debate",
        "type": "object",
    }


def test_the_fix_prompt_and_its_format_instructions_are_the_released_texts():
    slots = {name: f"<{name}>" for name in ("schema", "instructions", "completion", "error")}
    for template, released in (
        ("debatrix/format_instructions.j2", RELEASED_FORMAT_INSTRUCTIONS),
        ("debatrix/fix.j2", RELEASED_FIX_PROMPT),
    ):
        assert render(template, **slots) == released_render(released, **slots)
    fix = released_fix(Score)
    assert fix.tries == 3  # the released parser's max_retries
    instructions = released_render(RELEASED_FORMAT_INSTRUCTIONS, schema=schema_text(Score))
    assert fix.prompt("seven", "bad") == released_render(
        RELEASED_FIX_PROMPT, instructions=instructions, completion="seven", error="bad"
    )
