"""The rule-file shapes (factforge/rules/schema.py): every loader checks its file through them, and a bad field
is one PatternError naming the file, the rule and the field."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from factforge.errors import PatternError
from factforge.rules.extract import TurnRules
from factforge.rules.gatekeeper import Gatekeeper
from factforge.rules.lifecycle import SupersessionRules
from factforge.rules.ner import EntityRecognizer
from factforge.rules.patterns import PatternLibrary
from factforge.rules.rulefile import Problems, default_patterns_dir
from factforge.rules.schema import (FactChecksSpec, FactsFileSpec, GateShapesSpec, GrammarWordsSpec, Spec, TimeWordsSpec,
                                    check)
from factforge.rules.secrets import SecretScanner
from factforge.rules.segment import Segmenter

LOADERS: dict[str, Callable[[Path], Any]] = {
    "patterns": PatternLibrary.from_dir, "gate": Gatekeeper.from_dir, "secrets": SecretScanner.from_dir,
    "ner": EntityRecognizer.from_dir, "supersession": SupersessionRules.from_dir, "turns": TurnRules.from_dir,
    "segment": Segmenter.from_dir,
}


@pytest.mark.parametrize(
    ("loader", "file", "old", "new", "expected"),
    [
        ("patterns", "preference.yaml", "  - id: pref.like\n    category: preference\n",
         "  - id: pref.like\n    category: hobby\n",
         "preference.yaml: rule pref.like: category: 'hobby' is not one of preference,"),
        ("patterns", "preference.yaml", "  - id: pref.like\n    category: preference\n    relation: likes\n"
         "    subject: subj\n    confidence: 0.85\n", "  - id: pref.like\n    category: preference\n"
         "    relation: likes\n    subject: subj\n    confidence: high\n",
         "preference.yaml: rule pref.like: confidence: input should be a valid number (got 'high')"),
        ("gate", "injection.yaml", "  - id: ignore_above\n    language: en\n",
         "  - id: ignore_above\n    language: [en]\n",
         "injection.yaml: rule ignore_above: language: input should be a valid string (got ['en'])"),
        ("gate", "gate.yaml", "  min_letters: 10\n", "  min_letters: 0\n",
         "gate.yaml: thresholds.min_letters: must be a positive whole number (got 0)"),
        ("segment", "gate.yaml", '  latin_terminators: ".!?…;"\n', '  latin_terminators: ".!? x"\n',
         "gate.yaml: segment: latin_terminators: must be a string of punctuation characters (got '.!? x')"),
        ("secrets", "secrets.yaml", "  - id: aws_access_key\n    kind: aws_key\n",
         "  - id: aws_access_key\n    kind: AWS key\n",
         "secrets.yaml: rule aws_access_key: kind: must be a lowercase identifier"),
        ("ner", "entities.yaml", "  - id: url\n    type: url\n", "  - id: url\n    type: link\n",
         "entities.yaml: rule url: type: 'link' is not one of"),
        ("ner", "entities.yaml", "      - {name: PostgreSQL, aliases: [postgres, psql, pg, postgre]}\n",
         "      - {name: PostgreSQL, aliases: [postgres, psql, ' pg', postgre]}\n",
         "gazetteer entry PostgreSQL: aliases[2]: must be non-empty, without surrounding spaces (got ' pg')"),
        ("ner", "entities.yaml", "      scope: match\n      needs: [\"```\"]\n",
         "      scope: file\n      needs: [\"```\"]\n",
         "entities.yaml: code_context rule fenced_code: scope: 'file' is not one of line, match"),
        ("supersession", "supersession.yaml", "works_as, is_called, age_is]\n    same: [subject, relation]\n",
         "works_as, is_called, age_is]\n    same: [subject, colour]\n",
         "supersession.yaml: rule single_valued_attribute: same[1]: must be one of subject, relation, category or "
         "slot:<name> (got 'colour')"),
        ("turns", "turns.yaml", "    says: \"I'm {a} {x}.\"\n    lower: [x]\n",
         "    says: \"I'm {a} {x}.\"\n    lower: x\n",
         "turns.yaml: answer answer.job: lower: input should be a valid list (got 'x')"),
    ],
)
def test_a_bad_field_names_file_rule_and_field(tmp_path: Path, loader: str, file: str, old: str, new: str,
                                               expected: str) -> None:
    for src in default_patterns_dir().glob("*.yaml"):
        shutil.copy(src, tmp_path / src.name)
    text = (tmp_path / file).read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    (tmp_path / file).write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(PatternError) as info:
        LOADERS[loader](tmp_path)
    assert expected in str(info.value), str(info.value)
    assert "(1 problem(s))" in str(info.value), str(info.value)


def test_what_failed_is_left_out_and_the_rest_still_checked() -> None:
    problems = Problems()
    raw = {"classes": {"pointer": ["that", "it"], "evaluation": ["great", 7]},
           "kinds": {"reaction": ["pointer evaluation"], "smalltalk": ["pointer"]}, "colour": "red"}
    spec = check(GateShapesSpec, raw, "gate.yaml: shapes", problems)
    assert spec is not None
    assert spec.classes == {"pointer": ["that", "it"], "evaluation": ["great"]}
    assert spec.kinds == {"reaction": ["pointer evaluation"]}
    assert problems.items == [
        "gate.yaml: shapes: classes.evaluation[1]: input should be a valid string (got 7)",
        "gate.yaml: shapes: kinds: 'smalltalk' is not one of greeting, thanks, goodbye, acknowledgement, reaction, "
        "filler",
        "gate.yaml: shapes: unknown key 'colour'",
    ]


def test_a_bad_rule_is_left_out_whole_and_a_missing_part_fails_the_file() -> None:
    rule = {"id": "r.ok", "category": "preference", "regex": "x", "template": "User likes x", "confidence": 0.5,
            "relation": "likes", "keywords": ["x"], "examples": [{"text": "x", "fact": "User likes x"}],
            "counter_examples": ["y"]}
    problems = Problems()
    spec = check(FactsFileSpec, {"kind": "facts", "rules": [rule, {**rule, "id": "r.bad", "colour": 1}, "nope"]},
                 "f.yaml", problems)
    assert spec is not None and [r.id for r in spec.rules] == ["r.ok"]
    assert problems.items == ["f.yaml: rule r.bad: unknown key 'colour'", "f.yaml: rule #3: must be a mapping"]
    problems = Problems()
    assert check(FactsFileSpec, {"kind": "facts", "rules": [{**rule, "confidence": 2}]}, "f.yaml", problems) is None
    assert problems.items == ["f.yaml: rule r.ok: confidence: must be a number in 0..1 (got 2)"]


@pytest.mark.parametrize(
    ("name", "spec", "key", "value", "expected"),
    [
        ("grammar_words.yaml", GrammarWordsSpec, "irregular_third", ["has"],
         "grammar_words.yaml: irregular_third: must be a mapping"),
        ("time_words.yaml", TimeWordsSpec, "weekdays", "monday",
         "time_words.yaml: weekdays: input should be a valid list (got 'monday')"),
        ("fact_checks.yaml", FactChecksSpec, "min_content", {"cjk_chars": 4, "min_words": -1, "content_words": 1,
                                                         "clause_words": ["is"], "fragment_openers": ["a"]},
         "fact_checks.yaml: min_content.min_words: must be a whole number >= 0 (got -1)"),
    ],
)
def test_the_shipped_data_word_lists_have_a_shape_too(name: str, spec: type[Spec], key: str, value: Any,
                                                      expected: str) -> None:
    raw = yaml.safe_load(resources.files("factforge").joinpath(f"data/{name}").read_text(encoding="utf-8"))
    assert check(spec, raw, name, Problems()) is not None  # the shipped file passes
    problems = Problems()
    assert check(spec, {**raw, key: value}, name, problems) is None
    assert problems.items == [expected]


def test_a_key_written_twice_in_a_rule_file_is_an_error_not_a_silent_override(tmp_path: Path) -> None:
    from factforge.rules.rulefile import Problems, read_yaml

    path = tmp_path / "twice.yaml"
    path.write_text("rules:\n  - id: a\nthresholds: {x: 1}\nrules:\n  - id: b\n", encoding="utf-8")
    problems = Problems()
    assert read_yaml(path, problems) is None
    assert any("duplicate key 'rules' (line 4)" in str(item) for item in problems.items), problems.items
    nested = tmp_path / "nested.yaml"
    nested.write_text("grounding:\n  related: [a]\n  related: [b]\n", encoding="utf-8")
    problems = Problems()
    assert read_yaml(nested, problems) is None and problems.items
    listed = tmp_path / "listed.yaml"  # a list as a key: a clear problem, not a TypeError from the check
    listed.write_text("? [a, b]\n: 1\n", encoding="utf-8")
    problems = Problems()
    assert read_yaml(listed, problems) is None and problems.items
    fine = tmp_path / "fine.yaml"  # the same key in two different mappings is fine
    fine.write_text("a: {id: 1}\nb: {id: 2}\n", encoding="utf-8")
    assert read_yaml(fine, Problems()) == {"a": {"id": 1}, "b": {"id": 2}}
