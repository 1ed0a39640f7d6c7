"""Exact top-n BM25 in one statement, with safe pruning (MaxScore over per-lexeme bounds).

The query's lexemes are taken in order of their largest possible contribution (``bound``), highest first.
Step ``j`` scores every visible document holding lexeme ``j`` and none of the lexemes before it, so every
document holding any query lexeme belongs to exactly one step. A document of step ``j`` can score at most
``sum over i >= j of contribution_i(dl)``, where ``contribution_i(dl) = idf_i (k1+1) T_i / (T_i + k1 (1 - b +
b dl / avgdl))`` with ``T_i`` the largest term frequency of lexeme ``i`` in any document (``max_tf``, kept by
the statistics triggers, migration 0011) and ``dl`` the document's length: BM25 grows with tf and shrinks
with dl, so this is an upper bound of its real score. Once ``n`` documents are scored, the ``n``-th best
score ``theta`` is a lower bound of the true ``n``-th best; a step whose bound at its lexeme's shortest
document (``min_dl``) is below ``theta`` is skipped without touching the index, and a step that runs scores
each document it reads (the term frequencies from ``ts_rank``, see :data:`TF_EXACT`: about what reading the
document costs) and keeps its ``n`` best above ``theta``. Nothing skipped could have entered the top ``n``
(a document scoring exactly ``theta`` ties the ``n``-th: ties stand in for each other), so the result is the
exact BM25 top ``n`` over everything the caller may see; the scores of the ranks are those of exact BM25, and
among documents of equal score the ones returned may differ.

A step of a common lexeme read every visible document of the lexeme (the text index lists them in no order of
score): at 1M facts, 2,000-16,500 for the bench's slowest questions, ~2 us each. The scoped text index also keys
each lexeme of a document by its *impact class* (migration 0025): its tf (1, 2, 3, 4 and more) and the document's
length class (:func:`dl_class`). Every document of a class has the same bound (the lexeme's share at the class's
tf and shortest length, plus the later lexemes' bounds there), so a step of a common lexeme (:data:`SEED_DF`)
*walks* its classes in order of their bound (:data:`CLASS_WALK` of them, each a probe of the index), taking
documents until it has ``n``; every class before the last one it touched was read in full. It scores those,
takes theta, and then reads only the classes whose bound beats theta (none, when the walk's documents tie at
the best class's bound: "what is the rule about a migration?" reads 40 documents instead of 16,500), or all the
lexeme's documents if a class it did not list may still beat theta. The walk's own documents may be read again
there; a document's best score counts once.

All statistics (document frequencies, corpus size, average length) are read once, by the first of the two
statements, and handed to the second as parameters: the bounds and the scores use the same numbers even
when facts are written meanwhile, and the second statement's text depends only on its shape, so that a
connection that has run it before runs it prepared, without planning it again.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .scope import scope_keys

__all__ = ["BM25_K1", "BM25_B", "bm25_query", "bm25_query_from", "bm25_ranks", "bm25_ranks_sized", "terms_sql",
           "terms_sql_of", "send_ranks", "SCOPED_TSV"]

BM25_K1 = 1.2
BM25_B = 0.75

# Queries with operators ("quotes", -not, or) keep the web-search meaning: every candidate matches this.
_WEBSEARCH = "websearch_to_tsquery('english', %(q)s)"
_OPERATORS = re.compile(r'(^|\s)-\S|"|\bor\b', re.IGNORECASE)
_NEGATION = re.compile(r'(^|\s)-\S')

# The term statistics of each searched table: facts (and their narrow copy) and episodes.
_STATS = {"facts": "bm25", "fact_terms": "bm25", "turns": "episode_bm25"}
# Tables whose text index is the scoped one (factforge_scoped_tsv); the facts table's is plain.
_SCOPED_TABLES = ("fact_terms", "turns")

# A step whose lexeme is in more than this many documents (all scopes) walks its impact classes (above).
SEED_DF = 2000

# The statistics are the folded base plus the deltas that writers appended since (migration 0016); the
# views {stats}_terms / {stats}_corpus say the same, but a join would aggregate the whole view first.
# One row per query lexeme, or one row of NULLs if there is none: the corpus size comes back either way.
_QUERY_TERMS = """
    SELECT u.lexeme, greatest(0, coalesce(b.df, 0))::bigint, b.max_tf, b.min_dl, c.n_docs, c.total_len
    FROM {stats}_corpus c
    LEFT JOIN (SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', %(q)s))) u ON true
    LEFT JOIN LATERAL (SELECT sum(df) AS df, max(max_tf) AS max_tf, min(min_dl) AS min_dl
                       FROM (SELECT df, max_tf, min_dl FROM {stats}_terms_base WHERE lexeme = u.lexeme
                             UNION ALL
                             SELECT df, max_tf, min_dl FROM {stats}_terms_delta WHERE lexeme = u.lexeme) x) b
              ON true"""

# fact_terms' and turns' text indexes (migrations 0006, 0010) hold each document's lexemes twice: as they
# are, and prefixed with the document's *scope key* - "g" (global), "t" + md5(team) or "p" + md5(agent) -
# and a space, which no parsed lexeme contains. A caller's query term becomes (g term | t<team> term |
# p<agent> term), so the index intersects posting lists of documents the caller may see only.
SCOPED_TSV = "factforge_scoped_tsv(f.tsv, f.visibility, f.team_id, f.agent_id)"
_LONG_LEXEME = 1000  # bytes; a longer lexeme is keyed by its md5 so that key + lexeme fits a tsvector


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _tsquery_text(lexemes: Sequence[str]) -> str:
    """A tsquery literal: any of ``lexemes`` (already normalised by to_tsvector)."""
    return " | ".join(_quote(x) for x in lexemes)


def _scoped_tsquery_text(lexeme: str, keys: Sequence[str]) -> str:
    """A tsquery literal: ``lexeme`` in any of the ``keys``' scopes."""
    raw = lexeme.encode()
    key_lexeme = hashlib.md5(raw).hexdigest() if len(raw) > _LONG_LEXEME else lexeme
    return " | ".join(_quote(f"{k} {key_lexeme}") for k in keys)


@dataclass(frozen=True, slots=True)
class _Term:
    lexeme: str
    df: int
    idf: float
    num: float  # contribution(dl) = num / (c + slope * dl), an upper bound of the lexeme's share of a score
    c: float
    slope: float
    min_dl: int
    max_tf: int | None = None  # None: no bound kept

    def bound(self, dl: float) -> float:
        return self.num / (self.c + self.slope * dl)

    def share(self, tf: int, dl: float) -> float:
        """The lexeme's share of the score of a document of length ``dl`` holding it ``tf`` times."""
        return self.idf * (BM25_K1 + 1) * tf / (tf + BM25_K1 * (1 - BM25_B) + self.slope * dl)


def terms_sql(table: str) -> str:
    """The first of a BM25 search's two statements, for ``table`` (see the module docstring): the statistics
    of the query's lexemes (parameter ``%(q)s``), whose rows :func:`bm25_query_from` turns into the second. A
    caller that searches several tables sends these together, then the second statements together."""
    return _QUERY_TERMS.format(stats=_STATS.get(table, "bm25"))


def terms_sql_of(tables: Sequence[str]) -> str:
    """:func:`terms_sql` of several tables in one statement (one statement to prepare, bind and read instead of
    one per table): each row is led by its table's place in ``tables``."""
    return " UNION ALL ".join(f"SELECT {i} AS kind, s.* FROM ({terms_sql(table)}) s" for i, table in enumerate(tables))


def _terms(rows: Sequence[Any]) -> tuple[list[_Term], float, int]:
    """The query's lexemes that some document holds, highest bound first, the average length and the number
    of documents, from the rows of :func:`terms_sql`."""
    corpus = int(rows[0][4] or 0)
    n_docs = max(corpus, 1)
    avgdl = max(float(rows[0][5] or 0) / n_docs, 1.0)
    k1, b = BM25_K1, BM25_B
    out = []
    for lexeme, df, max_tf, min_dl, _, _ in rows:
        if not df:  # no document holds it: it cannot match
            continue
        idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        if max_tf is None:  # no bound kept: tf unbounded, contribution below idf (k1 + 1)
            num, c, slope = idf * (k1 + 1), 1.0, 0.0
        else:
            num, c, slope = idf * (k1 + 1) * max_tf, max_tf + k1 * (1 - b), k1 * b / avgdl
        out.append(_Term(lexeme, int(df), idf, num, c, slope, max(int(min_dl or 1), 1),
                         None if max_tf is None else int(max_tf)))
    out.sort(key=lambda t: (-t.bound(t.min_dl), t.lexeme))
    return out, avgdl, corpus


def _union(names: Sequence[str]) -> str:
    """SQL: the (id, score) rows of the named steps, one after another (a document may be in several)."""
    return " UNION ALL ".join(f"SELECT id, score FROM {name}" for name in names)


def _beats(first: int, last: int, dl: str, theta: str) -> str:
    """SQL: a document of length ``dl`` holding (at most) the terms ``first`` .. ``last - 1`` may score above
    ``theta``: its bound does. Scores within a relative 1e-8 of theta count as ties (float rounding of the bound
    stays far below). The bounds' numbers are parameters (:func:`_bound_params`)."""
    parts = " + ".join(f"%(bm25_num{i})s::float8 / (%(bm25_c{i})s::float8 + %(bm25_slope{i})s::float8 * {dl})"
                       for i in range(first, last))
    return f"({parts}) > {theta} * 1.00000001"


def _bound_params(terms: Sequence[_Term], avgdl: float) -> dict[str, Any]:
    """The numbers of the statement: each term's bound and shortest document, and the length norm's slope.

    They travel as parameters, never as SQL text, so that the text of a statement depends only on its shape
    (table, filter, number of terms, which steps are seeded): psycopg prepares a text it has run five times on a
    connection, and PostgreSQL then stops planning it anew (planning was 30-45% of the statement's time)."""
    out: dict[str, Any] = {"bm25_norm": BM25_K1 * BM25_B / avgdl}
    for i, t in enumerate(terms):
        out.update({f"bm25_num{i}": t.num, f"bm25_c{i}": t.c, f"bm25_slope{i}": t.slope,
                    f"bm25_mindl{i}": float(t.min_dl), f"bm25_from{i}": t.min_dl, f"bm25_idf{i}": t.idf,
                    f"bm25_l{i}": _quote(t.lexeme), f"bm25_x{i}": t.lexeme})
    return out


# Impact classes (migration 0025): the scoped text index keys each lexeme of a document also as
# "<scope key> <lexeme> <t>.<d>", t its tf (TF_CLASSES: that many and more), d the document's length class.
TF_CLASSES = 4
# A later lexeme in at most this share of the documents is *rare*: a walked step reads the documents holding its
# lexeme and a rare later one apart, in full (an intersection in the text index: few), and its classes' bounds leave
# the rare lexemes out. ("Netlify vs Neovim": a Netlify document without "neovim" scores at most Netlify's share.)
RARE_SHARE = 0.2
# How many classes of a step its walk may read, in order of their bound (each a probe of the text index: a few us).
CLASS_WALK = 16


def dl_class(dl: int) -> int:
    """The length class of a document of ``dl`` lexemes: its length below 16, above it the length with all but its
    four highest bits cleared (as factforge_scoped_tsv, migration 0025)."""
    if dl < 16:
        return dl
    shift = dl.bit_length() - 4
    return (dl >> shift) << shift


def _classes(terms: Sequence[_Term], j: int, later: Sequence[int]) -> tuple[list[tuple[int, int, float]], float] | None:
    """The impact classes ``(t, d, bound)`` of step ``j``'s lexeme, highest bound first (at most
    :data:`CLASS_WALK`), and the highest bound of any class not listed. A class's bound: the lexeme's share at
    tf ``t`` (its ``max_tf`` for the last tf class) and the class's shortest length, plus the bounds there of the
    ``later`` lexemes (those the class's documents may hold). None: the lexeme keeps no ``max_tf``."""
    term = terms[j]
    if term.max_tf is None or any(terms[i].max_tf is None for i in later):
        return None
    # CLASS_WALK + 1 length classes from the lexeme's shortest: the bound falls with the length, so no class of a
    # tf beyond them can beat the listed ones of that tf
    ds, d = [], dl_class(term.min_dl)
    for _ in range(CLASS_WALK + 1):
        ds.append(d)
        d = d + 1 if d < 16 else d + (1 << (d.bit_length() - 4))
    rest = [(x.num, x.c, x.slope) for x in (terms[i] for i in later)]
    k = BM25_K1 * (1 - BM25_B)
    top_tf = min(term.max_tf, TF_CLASSES)
    tfs = [(t, t if t < TF_CLASSES else max(term.max_tf, t)) for t in range(1, top_tf + 1)]
    scale, slope, min_dl = term.idf * (BM25_K1 + 1), term.slope, term.min_dl
    candidates = []
    for d in ds:
        dl = d if d > min_dl else min_dl
        base = sum(num / (c + sl * dl) for num, c, sl in rest) if rest else 0.0
        for t, tf in tfs:
            candidates.append((scale * tf / (tf + k + slope * dl) + base, t, d))
    beyond = max(c[0] for c in candidates[-top_tf:])  # the last length class, listed in no case
    del candidates[-top_tf:]
    candidates.sort(reverse=True)
    listed = [(t, d, b) for b, t, d in candidates[:CLASS_WALK]]
    return listed, max([beyond] + [c[0] for c in candidates[CLASS_WALK:CLASS_WALK + 1]])


def _class_heads(lexeme: str, keys: Sequence[str]) -> list[str]:
    """The start of a tsquery term for ``lexeme`` in each of the ``keys``' scopes; the statement ends each with a
    class ``t.d`` and a quote (:data:`_CLASS_QUERY`)."""
    raw = lexeme.encode()
    key_lexeme = hashlib.md5(raw).hexdigest() if len(raw) > _LONG_LEXEME else lexeme
    return [_quote(f"{k} {key_lexeme} ")[:-1] for k in keys]


# SQL: class c (t, d) of step {j}'s lexeme in any of the caller's scopes, as the text of a tsquery
_CLASS_QUERY = ("(SELECT string_agg(h || c.t || '.' || c.d || '''', ' | ') "
                "FROM unnest(%(bm25_ch{j})s::text[]) h)")


# A lexeme's term frequency in a document, read without unnesting the tsvector. Unnesting it (a set-returning
# function per document, each element with its positions and weights arrays) cost ~3 us a document at 200k
# facts, ten times reading the document, and a step scored every document its bound kept. ts_rank with every
# weight 1 gives, for a query of one lexeme, sum(1 / i^2 for i in 1..tf) / 1.64493406685 (PostgreSQL's
# calc_rank_or; 0 when the lexeme is absent, one position when it has none), as a float4 that is a function of
# tf alone; width_bucket over the midpoints between consecutive values returns tf (its binary search), exactly
# up to TF_EXACT: the gaps (>= 2.8e-4 there) are a hundred times the float4 sums' rounding. A larger tf is read
# from the unnested tsvector, as before. tests/test_search.py checks tf 0-40 against the positions.
TF_EXACT = 32
_ZETA2 = 1.64493406685


def _rank_of_tf(tf: int) -> float:
    return sum(1.0 / (i * i) for i in range(1, tf + 1)) / _ZETA2


# the lower bounds of tf 1 .. TF_EXACT + 1 (the last: "more than TF_EXACT")
TF_CUTS = [_rank_of_tf(1) / 2] + [(_rank_of_tf(t - 1) + _rank_of_tf(t)) / 2 for t in range(2, TF_EXACT + 2)]
# ... written into the statement (repr reads back as the same float8): sent as a parameter, the 33 numbers were
# turned into text by psycopg and parsed by PostgreSQL on every run of every BM25 statement.
_TF_CUTS_SQL = "'{" + ",".join(repr(c) for c in TF_CUTS) + "}'::float8[]"


def _tf(tsv: str, i: int) -> str:
    """SQL: the term frequency of query lexeme ``i`` in the document ``tsv`` (0: absent); see :data:`TF_EXACT`."""
    return (f"coalesce(nullif(width_bucket(ts_rank('{{1,1,1,1}}'::float4[], {tsv}, %(bm25_l{i})s::tsquery)::float8, "
            f"{_TF_CUTS_SQL}), {TF_EXACT + 1}), (SELECT coalesce(array_length(x.positions, 1), 1) "
            f"FROM unnest({tsv}) x WHERE x.lexeme = %(bm25_x{i})s))::float8")


def _scored(scan: str, first: int, last: int, keep: str = "") -> str:
    """SQL: (id, score) of each document ``scan`` yields (id, tsv), holding query lexeme ``first`` and none before
    it: its BM25 score over the lexemes ``first`` .. ``last - 1`` (no other can be in it). ``keep``: a condition
    on ``score`` (e.g. above theta)."""
    k1, b = BM25_K1, BM25_B
    tfs = ", ".join(f"{_tf('s.tsv', i)} AS tf{i}" for i in range(first, last))
    norm = f"({k1} * (1 - {b}) + %(bm25_norm)s::float8 * d.dl)"
    score = " + ".join(f"%(bm25_idf{i})s::float8 * d.tf{i} * {k1 + 1} / (d.tf{i} + {norm})" for i in range(first, last))
    # OFFSET 0: each tf is computed once, not once for each mention in the score
    inner = f"SELECT s.id, length(s.tsv) AS dl, {tfs} FROM ({scan}) s OFFSET 0"
    return (f"SELECT id, score FROM (SELECT d.id, {score} AS score FROM ({inner}) d) z"
            + (f" WHERE {keep}" if keep else ""))


def _top(scored: str) -> str:
    """SQL: the ``%(n)s`` best of ``scored``: no other of its documents can be in the top n (ties stand in)."""
    return f"{scored} ORDER BY score DESC LIMIT %(n)s"


def _theta(found: Sequence[str]) -> str:
    """SQL: the n-th best score of the distinct documents scored so far (0 while fewer)."""
    return (f"(SELECT coalesce((SELECT max(score) AS score FROM ({_union(found)}) x GROUP BY id ORDER BY 1 DESC "
            "OFFSET %(n)s - 1 LIMIT 1), 0))")


def bm25_query(conn: Any, where: str, params: dict[str, Any], query: str, table: str = "facts"
               ) -> tuple[str, dict[str, Any]] | None:
    """The exact BM25 top-``%(n)s`` statement for ``query`` and its parameters (None: no query word is in any
    document). ``where`` is the caller's filter on rows ``f`` of ``table``: ``facts``, its narrow copy
    ``fact_terms`` (scoped text index) or ``turns`` (episodes, scoped text index)."""
    return _query(conn, where, params, query, table)[0]


def _query(conn: Any, where: str, params: dict[str, Any], query: str, table: str
           ) -> tuple[tuple[str, dict[str, Any]] | None, int]:
    """:func:`bm25_query`'s answer, and the number of documents of ``table``'s kind (all scopes)."""
    return bm25_query_from(conn.execute(terms_sql(table), {"q": query}).fetchall(), where, params, query, table)


def bm25_query_from(term_rows: Sequence[Any], where: str, params: dict[str, Any], query: str, table: str, *,
                    text_ids: bool = False) -> tuple[tuple[str, dict[str, Any]] | None, int]:
    """:func:`bm25_query`'s answer from the rows of :func:`terms_sql` (``params`` with ``%(n)s``), and the number
    of documents of ``table``'s kind (all scopes). ``text_ids``: the ids come back as their text (``::text``)."""
    terms, avgdl, corpus = _terms(term_rows)
    if not terms:
        return None, corpus
    keys = scope_keys(params.get("v_agent"), params.get("v_team")) if table in _SCOPED_TABLES else None
    params = dict(params)
    params.update(_bound_params(terms, avgdl))
    # (SELECT ...): the query is parsed once per step, not once per row
    extra = f" AND ts_match_vq(f.tsv, (SELECT {_WEBSEARCH}))" if _OPERATORS.search(query) else ""
    def match(i: int) -> str:
        if keys is not None:
            params[f"bm25_t{i}"] = _scoped_tsquery_text(terms[i].lexeme, keys)
            return f"{SCOPED_TSV} @@ %(bm25_t{i})s::tsquery"
        params[f"bm25_t{i}"] = _quote(terms[i].lexeme)
        # the analyst's view: the scoped index holds every lexeme unprefixed too
        return f"{SCOPED_TSV if table in _SCOPED_TABLES else 'f.tsv'} @@ %(bm25_t{i})s::tsquery"

    base = f"SELECT f.id, f.tsv FROM {table} f WHERE {{match}} AND {where}{extra}"
    ctes: list[str] = []
    found: list[str] = []
    last = len(terms)
    for j in range(last):
        gate = ""
        if extra and not _NEGATION.search(query):
            # A query of and/or (no negation) that even a document holding every lexeme from j on but none
            # before cannot match ("user prefer (python | mariadb)" once python and mariadb had their steps)
            # leaves step j nothing: skipped without a row read. That document has no positions, so a phrase
            # (<->, <N>) is asked as an and, which every document matching the phrase matches too.
            params[f"bm25_rest{j}"] = [t.lexeme for t in terms[j:]]
            gate = (f" AND ts_match_vq(array_to_tsvector(%(bm25_rest{j})s::text[]), "
                    f"regexp_replace(({_WEBSEARCH})::text, '<(-|[0-9]+)>', '&', 'g')::tsquery)")
        theta = ""
        if found:  # the whole step is skipped when even its shortest document could not reach theta
            # theta once per step (a CTE), however many conditions of the step compare with it
            ctes.append(f"t{j} AS MATERIALIZED (SELECT {_theta(found)} AS v)")
            theta = f"(SELECT v FROM t{j})"
            gate += f" AND {_beats(j, last, f'%(bm25_mindl{j})s::float8', theta)}"
        notprior = ""
        if j:
            params[f"bm25_p{j}"] = _tsquery_text([t.lexeme for t in terms[:j]])
            notprior = f" AND NOT ts_match_vq(f.tsv, %(bm25_p{j})s::tsquery)"
        scan = base.format(match=match(j)) + gate + notprior
        rare = [i for i in range(j + 1, last) if terms[i].df <= RARE_SHARE * corpus]
        classes = (_classes(terms, j, [i for i in range(j + 1, last) if i not in rare])
                   if keys is not None and terms[j].df > SEED_DF and not extra else None)
        if classes is not None and keys is not None:
            # A common lexeme: its impact classes (migration 0025) are read in order of their bound, each by the
            # text index, until n documents are found (the walk); every class before the last one it touched was
            # read in full. The walk's documents are scored, theta taken, and of the rest only the classes whose
            # bound beats theta are read - or, if a class the walk did not list may, all the lexeme's documents.
            # The documents that hold a rare later lexeme too are read first, all of them (a{j}): the classes'
            # bounds leave the rare lexemes out, and hold for every other document. A document of a{j} that the
            # classes' reads meet again has its exact score there too (and one a{j} did not keep is below n others).
            if rare:
                params[f"bm25_r{j}"] = _tsquery_text([terms[i].lexeme for i in rare])
                both = (f"SELECT f.id, f.tsv FROM {table} f WHERE {SCOPED_TSV} @@ (%(bm25_t{j})s::tsquery && "
                        f"%(bm25_r{j})s::tsquery) AND {where}{extra}{gate}{notprior}")
                kept = _top(_scored(both, j, last, f"score > {theta}" if found else ""))
                ctes.append(f"a{j} AS MATERIALIZED ({kept})")
                found.append(f"a{j}")
            listed, beyond = classes
            params[f"bm25_ch{j}"] = _class_heads(terms[j].lexeme, keys)
            params[f"bm25_ct{j}"] = [t for t, _, _ in listed]
            params[f"bm25_cd{j}"] = [d for _, d, _ in listed]
            params[f"bm25_cb{j}"] = [b for _, _, b in listed]
            params[f"bm25_cx{j}"] = beyond
            classes_sql = (f"unnest(%(bm25_ct{j})s::int[], %(bm25_cd{j})s::int[], %(bm25_cb{j})s::float8[]) "
                           "WITH ORDINALITY c(t, d, b, ord)")
            class_query = _CLASS_QUERY.format(j=j)
            rows = (f"SELECT f.id, f.tsv FROM {table} f WHERE {SCOPED_TSV} @@ {class_query}::tsquery AND "
                    f"{where}{extra}{gate}{notprior} LIMIT %(n)s")
            ctes.append(f"w{j} AS MATERIALIZED (SELECT x.id, x.tsv, c.ord FROM {classes_sql} "
                        f"CROSS JOIN LATERAL ({rows}) x LIMIT %(n)s)")
            ctes.append(f"seed{j} AS MATERIALIZED ({_scored(f'SELECT id, tsv FROM w{j}', j, last)})")
            ctes.append(f"u{j} AS MATERIALIZED (SELECT {_theta([*found, f'seed{j}'])} AS v)")
            # the first class the walk did not read in full
            ctes.append(f"e{j} AS MATERIALIZED (SELECT CASE WHEN (SELECT count(*) FROM w{j}) >= %(n)s "
                        f"THEN (SELECT max(ord) FROM w{j}) ELSE cardinality(%(bm25_ct{j})s::int[]) + 1 END AS k)")
            ctes.append(f"q{j} AS MATERIALIZED (SELECT CASE WHEN %(bm25_cx{j})s::float8 > (SELECT v FROM u{j}) "
                        f"* 1.00000001 THEN %(bm25_t{j})s::tsquery ELSE (SELECT string_agg({class_query}, ' | ') "
                        f"FROM {classes_sql} WHERE c.ord >= (SELECT k FROM e{j}) AND c.b > (SELECT v FROM u{j}) "
                        "* 1.00000001)::tsquery END AS q)")
            rest = (f"SELECT f.id, f.tsv FROM {table} f WHERE {SCOPED_TSV} @@ (SELECT q FROM q{j}) AND {where}"
                    f"{extra}{gate}{notprior}")
            ctes.append(f"r{j} AS MATERIALIZED ({_top(_scored(rest, j, last, f'score > (SELECT v FROM u{j})'))})")
            found.append(f"seed{j}")
        else:
            # Every document of the step is scored as it is read (a score costs about what reading the document
            # does, TF_EXACT), those not above theta dropped, the n best kept.
            ctes.append(f"r{j} AS MATERIALIZED ({_top(_scored(scan, j, last, f'score > {theta}' if found else ''))})")
        found.append(f"r{j}")
    # a seed's documents that tie theta are in no step's result (only better ones are): they count here
    ident = "x.id::text" if text_ids else "x.id"
    sql = (f"WITH {', '.join(ctes)} SELECT {ident} AS id, max(score) AS score FROM ({_union(found)}) x GROUP BY x.id "
           "ORDER BY score DESC, x.id LIMIT %(n)s")
    return (sql, params), corpus


def bm25_ranks(conn: Any, where: str, params: dict[str, Any], query: str, n: int, table: str = "facts"
               ) -> dict[Any, tuple[int, float]]:
    """The exact BM25 top ``n`` of ``table`` under ``where``: id -> (rank, score)."""
    return bm25_ranks_sized(conn, where, params, query, n, table)[0]


def bm25_ranks_sized(conn: Any, where: str, params: dict[str, Any], query: str, n: int, table: str = "facts"
                     ) -> tuple[dict[Any, tuple[int, float]], int]:
    """:func:`bm25_ranks`, and the number of documents of the table's kind that its statistics counted (search
    weighs the kinds' rank lists by it without asking again)."""
    built, corpus = _query(conn, where, {**params, "n": n}, query, table)
    if built is None:
        return {}, corpus
    with conn.pipeline():
        cur = send_ranks(conn, [built])[0]
    rows = cur.fetchall()
    return {fid: (rank, float(score)) for rank, (fid, score) in enumerate(rows, 1)}, corpus


# The top-n statement runs prepared, by its generic plan, from its first run on a connection. Its text is one of a
# few dozen shapes (table, number of lexemes, walked steps, operators) and its numbers are parameters; a shape's
# custom plans (PostgreSQL's choice for most of them, their generic plan's estimate being the higher) planned it
# anew on every run: 1-7 ms of a 4-6 lexeme statement at 200k facts under load, the statement's largest part when
# it reads a few hundred documents. 200 bench questions, 200k facts: server CPU facts p95 3.96 -> 2.50 ms, mean
# 1.36 -> 1.15 (episodes 1.85 -> 1.83, 0.90 -> 0.89), the same scores.
_GENERIC = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"


def send_ranks(conn: Any, built: Sequence[tuple[str, dict[str, Any]]], *, generic_set: bool = False) -> list[Any]:
    """Sends the top-n statements ``built`` (:func:`bm25_query_from`) on ``conn`` in the pipeline its caller holds
    open; returns their cursors. In autocommit (search's connections) the pipeline is one implicit transaction, and
    the plan setting ends with it; in a transaction it would outlive the statements, so it is not sent there.
    ``generic_set``: the caller's pipeline has set it already (search's vector settings), so it is not sent again.

    Each statement goes with its placeholders already numbered (:func:`_numbered`, once per text), through a raw
    cursor: psycopg numbers the named placeholders of a statement itself, by a regex over its text, and remembers
    the result only for statements under 4,096 characters and 50 parameters. A statement of two or more lexemes
    is longer (4-13 KB, ten more parameters per lexeme), so it was read again on every run: 100-260 us of the API's
    CPU per statement, two statements a search."""
    import psycopg

    if conn.autocommit and not generic_set:
        conn.execute(_GENERIC, prepare=True)
    cursors = []
    for sql, params in built:
        text, names = _numbered(sql)
        cursors.append(psycopg.RawCursor(conn).execute(text, [params[name] for name in names], prepare=True))
    return cursors


# psycopg's named placeholders (each %(name)s read in the default format, as a raw cursor reads $n) and its escaped
# percent sign; any other percent sign is a mistake in the statement
_NAMED = re.compile(r"%%|%\((\w+)\)s|%")


@lru_cache(maxsize=256)
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``%(name)s`` placeholders numbered (``$1``, ``$2`` ..., the same number for the same name)
    and ``%%`` read as ``%``, as psycopg would send it, and the names in the order of their numbers."""
    names: dict[str, int] = {}

    def number(m: re.Match[str]) -> str:
        if m.group() == "%%":
            return "%"
        if m.group(1) is None:
            raise ValueError(f"a statement has a stray percent sign at {m.start()}: {sql[m.start():m.start() + 20]!r}")
        return f"${names.setdefault(m.group(1), len(names) + 1)}"

    return _NAMED.sub(number, sql), tuple(names)
