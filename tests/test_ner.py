"""Entity recognition: the YAML's own examples, canonical names, overlaps, case-sensitive names, offsets,
broken rule files and speed."""

from __future__ import annotations

import shutil
import statistics
import timeit
from pathlib import Path

import pytest
import yaml

from factforge.errors import PatternError
from factforge.rules.ner import EntityRecognizer
from factforge.rules.rulefile import default_patterns_dir

NER = EntityRecognizer.from_dir()
RAW = yaml.safe_load((default_patterns_dir() / "entities.yaml").read_text(encoding="utf-8"))


def _example_cases() -> list[tuple[str, str, str | None, str | None]]:
    out = []
    for rule in RAW["regex"]:
        for ex in rule["examples"]:
            ex = ex if isinstance(ex, dict) else {"text": ex}
            out.append((rule["id"], ex["text"], ex.get("match"), ex.get("name")))
    return out


def _counter_cases() -> list[tuple[str, str]]:
    return [(rule["id"], text) for rule in RAW["regex"] for text in rule["counter_examples"]]


def _found_by(rule_id: str, text: str) -> list[tuple[str, str]]:
    """(matched text, entity name) of the entities a rule contributed to ``find``."""
    kind = next(k for k in NER.kinds if k.id == rule_id)
    return [(e.span.text, e.name) for e in NER.find(text)
            if e.source == "regex" and e.type == kind.type and e.span is not None]


@pytest.mark.parametrize(("rule_id", "text", "match", "name"), _example_cases())
def test_regex_kind_matches_its_examples(rule_id: str, text: str, match: str | None, name: str | None) -> None:
    found = _found_by(rule_id, text)
    assert found, f"{rule_id} found nothing in {text!r}"
    if match is not None:
        assert match in [m for m, _ in found]
    if name is not None:
        assert name in [n for _, n in found]


@pytest.mark.parametrize(("rule_id", "text"), _counter_cases())
def test_regex_kind_ignores_its_counter_examples(rule_id: str, text: str) -> None:
    kind = next(k for k in NER.kinds if k.id == rule_id)
    assert not [e for e in NER.find(text) if e.source == "regex" and e.type == kind.type]


@pytest.mark.parametrize("example", RAW["examples"], ids=lambda ex: ex["text"][:40])
def test_whole_text_examples(example: dict[str, object]) -> None:
    assert [e.name for e in NER.find(str(example["text"]))] == example["entities"]


def test_every_kind_has_examples_and_counter_examples_and_check_is_clean() -> None:
    assert {k.type for k in NER.kinds} >= {"url", "email", "path", "version", "cve", "ip", "hash"}
    for kind in NER.kinds:
        assert kind.examples and kind.counter_examples, kind.id
    assert NER.check() == []


def test_gazetteer_size() -> None:
    assert len(NER.entries) >= 250
    assert {e.type for e in NER.entries} >= {"technology", "organization"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("postgres", "PostgreSQL"),
        ("Postgres", "PostgreSQL"),
        ("PG", "PostgreSQL"),
        ("PostgreSQL", "PostgreSQL"),
        ("k8s", "Kubernetes"),
        ("vscode", "VS Code"),
        ("  visual   studio code ", "VS Code"),
        ("golang", "Go"),
        ("Go", "Go"),
        ("llama3.2", "Llama 3.2"),
        ("nextauth", "Auth.js"),
        ("github.com", "GitHub"),
        ("Rails", "Ruby on Rails"),
        ("cobol-2099", None),
        ("", None),
    ],
)
def test_canonical(name: str, expected: str | None) -> None:
    assert NER.canonical(name) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We ported it to React Native last year.", ["React Native"]),
        ("React and React Native share hooks.", ["React", "React Native"]),
        ("Spring Boot beats Spring here", ["Spring Boot", "Spring"]),
        ("clone https://github.com/acme/api.git now", ["https://github.com/acme/api.git"]),
        ("Set DATABASE_URL=postgres://u@db:5432/app", ["postgres://u@db:5432/app"]),
        ("Node v20.1.0 is the floor", ["Node.js", "Node.js v20.1.0"]),
        ("postgres and Postgres and PostgreSQL", ["PostgreSQL"]),  # each canonical name once
    ],
)
def test_overlaps_longest_wins_each_name_once(text: str, expected: list[str]) -> None:
    assert [e.name for e in NER.find(text)] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I go home", []),
        ("We use Go for services", ["Go"]),
        ("we rewrote it in golang", ["Go"]),
        ("go 1.22 added range over int", ["Go", "Go 1.22"]),
        ("Let's express our thanks this spring", []),
        ("Express on Node, deployed every Spring", ["Express", "Node.js", "Spring"]),
        ("the node crashed and the rust spread", []),
        ("Rust for the CLI", ["Rust"]),
        ("Swift and SwiftUI", ["Swift", "SwiftUI"]),
        ("a swift reply", []),
        ("next time we'll use expo", []),
        ("We use Expo", ["Expo"]),
    ],
)
def test_case_sensitive_short_names(text: str, expected: list[str]) -> None:
    assert [e.name for e in NER.find(text)] == expected


@pytest.mark.parametrize(
    "text",
    [
        "We moved from JWT to Clerk; DB is postgres 16 at 10.0.0.1, see https://x.dev/a.",
        "İstanbul team uses Kubernetes (k8s) — ﬁle at ~/.config/x and C:\\x\\y, commit 3f2a9c1.",
        "React Native + NativeWind + Expo on iOS; mail ops@example.com about CVE-2021-44228",
        "",
    ],
)
def test_offsets_point_into_the_text(text: str) -> None:
    entities = NER.find(text)
    assert bool(entities) is bool(text)
    last_end = -1
    for e in entities:
        assert e.span is not None
        assert text[e.span.start:e.span.end] == e.span.text
        assert e.span.start >= last_end  # text order, no overlaps
        last_end = e.span.end
        assert e.source in ("regex", "gazetteer")
    assert len({e.name for e in entities}) == len(entities)


def test_offsets_survive_lowercasing_that_changes_length() -> None:
    text = "İİİ then Kubernetes"
    (entity,) = NER.find(text)
    assert entity.name == "Kubernetes"
    assert text[entity.span.start:entity.span.end] == "Kubernetes"


def test_entity_types_and_sources() -> None:
    by_name = {e.name: e for e in NER.find("GitHub hosts it; Python 3.11 in src/app/main.py")}
    assert by_name["GitHub"].type == "organization"
    assert by_name["Python"].type == "technology" and by_name["Python"].source == "gazetteer"
    assert by_name["Python 3.11"].type == "version" and by_name["Python 3.11"].source == "regex"
    assert by_name["src/app/main.py"].type == "path"


def test_from_dir_is_cached() -> None:
    # Not ``is NER``: the cache holds the last 8 folders, and tests that ran earlier in this process (the order
    # is the scheduler's) may have loaded more since NER was made at import.
    cached = EntityRecognizer.from_dir()
    assert EntityRecognizer.from_dir() is cached
    assert EntityRecognizer.from_dir(default_patterns_dir()) is cached


# ------------------------------------------------------------------------------------ broken rule files


def _folder(tmp_path: Path, text: str) -> Path:
    for src in default_patterns_dir().glob("*.yaml"):
        shutil.copy(src, tmp_path / src.name)
    (tmp_path / "entities.yaml").write_text(text, encoding="utf-8")
    return tmp_path


BAD = """
version: 1
regex:
  - id: broken_regex
    type: url
    regex: "http(s"
    examples: ["http"]
    counter_examples: ["x"]
  - id: wrong_type
    type: colour
    regex: "red"
    examples: ["red"]
    counter_examples: ["x"]
  - id: example_misses
    type: cve
    regex: 'CVE-\\d{4}-\\d{4,7}'
    examples: ["CVE-12-1"]
    counter_examples: ["CVE-2021-44228"]
  - id: unknown_key
    type: ip
    regex: "1"
    colour: red
    examples: ["1"]
    counter_examples: []
gazetteer:
  - group: g
    entries:
      - {name: Foo, aliases: [foo]}
      - {name: Bar, aliases: [baz], oops: 1}
"""


def test_broken_rule_file_fails_with_one_error_naming_every_rule(tmp_path: Path) -> None:
    with pytest.raises(PatternError) as info:
        EntityRecognizer.from_dir(_folder(tmp_path, BAD))
    message = str(info.value)
    for fragment in ("rule broken_regex", "regex does not compile", "rule wrong_type", "'colour'",
                     "rule unknown_key", "gazetteer entry Foo", "already a name or alias", "gazetteer entry Bar",
                     "'oops'", "entities.yaml"):
        assert fragment in message, (fragment, message)


def test_example_its_regex_does_not_match_is_a_load_error(tmp_path: Path) -> None:
    text = (default_patterns_dir() / "entities.yaml").read_text(encoding="utf-8")
    broken = text.replace("We patched CVE-2021-44228 last week.", "We patched CVE-21-44 last week.")
    assert broken != text
    with pytest.raises(PatternError, match=r"rule cve: example 'We patched CVE-21-44 last week\.' does not match"):
        EntityRecognizer.from_dir(_folder(tmp_path, broken))


def test_whole_text_example_that_fails_is_a_load_error(tmp_path: Path) -> None:
    text = (default_patterns_dir() / "entities.yaml").read_text(encoding="utf-8")
    broken = text.replace("{text: \"I go home at six\", entities: []}", "{text: \"I go home at six\", entities: [Go]}")
    assert broken != text
    with pytest.raises(PatternError, match="I go home at six"):
        EntityRecognizer.from_dir(_folder(tmp_path, broken))


@pytest.mark.parametrize(("text", "fragment"), [("regex: [\n", "cannot read"), ("", "file is empty"),
                                                ("- a\n", "top level must be a mapping")])
def test_unreadable_rule_file(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(PatternError, match=fragment):
        EntityRecognizer.from_dir(_folder(tmp_path, text))


def test_new_technology_is_yaml_only(tmp_path: Path) -> None:
    text = (default_patterns_dir() / "entities.yaml").read_text(encoding="utf-8")
    extended = text.replace("      - {name: Ollama}\n", "      - {name: Ollama}\n      - {name: Frobnicator, aliases: [frob]}\n")
    assert extended != text
    ner = EntityRecognizer.from_dir(_folder(tmp_path, extended))
    assert [e.name for e in ner.find("we frob it")] == ["Frobnicator"]
    assert NER.find("we frob it") == []


# ----------------------------------------------------------------------------------------------- speed


def test_gazetteer_is_fast() -> None:
    text = ("We moved the mobile app from React Native 0.72 to Expo with NativeWind, auth is Clerk instead of "
            "JWT, and the API runs FastAPI on postgres 16 with pgvector; CI is GitHub Actions.")
    low = text.lower()
    NER.find(text)
    median = statistics.median(timeit.repeat(lambda: NER._gazetteer_hits(text, low), number=1, repeat=2000))
    # Measured ~30 µs; the bound leaves room for slow CI machines.
    assert median < 300e-6, median


# ------------------------------------------------------------------- hash false positives (seed 000, warning 8)


def _hashes(text: str) -> list[str]:
    return [e.name for e in NER.find(text) if e.type == "hash"]


SHA = "e83c5163316f89bfbde7d9ab23ca2e25604af290"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # code and VCS plumbing: not a mention
        (f'sha = "{SHA}"', []),
        (f"expected := {SHA[:12]}", []),
        (f'{{"commit": "{SHA}"}}', []),
        (f"commit {SHA}", []),
        (f"commit {SHA} (HEAD -> main, origin/main)\nAuthor: Ana <ana@example.com>", []),
        ("Merge: 3f2a9c1 e83c516", []),
        (f"Here is the log:\n```\n{SHA}\n3f2a9c1 fix the build\n```", []),
        (f"```\nunclosed fence {SHA}", []),
        (f"check(blob, {SHA})", []),
        # prose: a real reference, kept
        ("fixed in commit e83c1a2", ["e83c1a2"]),
        (f"We reverted commit {SHA} because it broke login.", [SHA]),
        (f"HEAD is {SHA}", [SHA]),
        (f"```\nx = {SHA}\n```\nThe fix landed in 3f2a9c1.", ["3f2a9c1"]),
        (f'sha = "{SHA}"\nbut prod runs 3f2a9c1', ["3f2a9c1"]),
    ],
)
def test_code_context_drops_hashes_in_code_only(text: str, expected: list[str]) -> None:
    assert _hashes(text) == expected


def test_code_context_leaves_other_entities_in_code() -> None:
    names = [e.name for e in NER.find(f"```\npip install fastapi  # {SHA}\n```")]
    assert names == ["pip", "FastAPI"]


def _context_cases() -> list[tuple[str, str, bool]]:
    return [(rule["id"], text, kept) for rule in RAW["code_context"]["rules"]
            for key, kept in (("examples", False), ("counter_examples", True)) for text in rule.get(key, [])]


@pytest.mark.parametrize(("rule_id", "text", "kept"), _context_cases())
def test_code_context_yaml_examples(rule_id: str, text: str, kept: bool) -> None:
    assert bool(_hashes(text)) is kept, rule_id


BAD_CONTEXT = """
  rules:
    - id: no_regex
      scope: line
      examples: ["x"]
    - id: bad_scope
      scope: file
      regex: "a"
      examples: ["a"]
    - id: bad_regex
      regex: "(["
      examples: ["a"]
"""


def test_broken_code_context_is_one_error(tmp_path: Path) -> None:
    text = (default_patterns_dir() / "entities.yaml").read_text(encoding="utf-8")
    start = text.index("code_context:\n") + len("code_context:\n")
    end = text.index("\nregex:\n")
    broken = text[:start] + "  types: [hash, colour]" + BAD_CONTEXT + text[end:]
    with pytest.raises(PatternError) as info:
        EntityRecognizer.from_dir(_folder(tmp_path, broken))
    message = str(info.value)
    for fragment in ("'colour' is not one of", "rule no_regex: missing regex", "rule bad_scope: scope",
                     "rule bad_regex", "regex does not compile"):
        assert fragment in message, (fragment, message)


def test_code_context_example_that_fails_is_a_load_error(tmp_path: Path) -> None:
    text = (default_patterns_dir() / "entities.yaml").read_text(encoding="utf-8")
    broken = text.replace("        - \"fixed in commit e83c1a2\"\n", "        - \"note: nothing here\"\n")
    assert broken != text
    with pytest.raises(PatternError, match="code_context git_header: counter-example 'note: nothing here'"):
        EntityRecognizer.from_dir(_folder(tmp_path, broken))
