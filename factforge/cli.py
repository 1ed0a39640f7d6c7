"""The ``factforge`` command. Thin: each command parses its arguments, makes one library call and prints.

Library errors become one line on stderr and exit code 1 (2 for usage errors), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import FactforgeError
from .jsonout import to_jsonable
from .types import CATEGORIES

if TYPE_CHECKING:
    from .cli_service import Add


def _print_json(obj: Any) -> None:
    print(json.dumps(to_jsonable(obj), ensure_ascii=False))


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [min(max(len(r[i]) for r in cells), 70) for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(c[: widths[i]].ljust(widths[i]) for i, c in enumerate(row)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _positive(value: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not at least 1")
    return n


def _readable(value: Any) -> str:
    """A value of ``stats`` or a report as a person reads it: mappings as ``a 3, b 5``, floats rounded."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_readable(v)}" for k, v in value.items()) or "none"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "-" if value is None else str(value)


def _when(value: str) -> datetime:
    from .inputs import check_timestamp

    ts = check_timestamp(value)
    assert ts is not None
    return ts


def _settings(args: argparse.Namespace) -> Any:
    """The environment's settings, with the global ``--database-url`` applied."""
    from .settings import get_settings

    settings = get_settings()
    url = getattr(args, "database_url", None)
    return settings.with_(database_url=url) if url else settings


def _announce_new_home(settings: Any) -> None:
    """Say so on a terminal when a command is about to create a new embedded database (another home than
    the one the user may have meant, e.g. the demo's). Scripts keep their one-line stderr contract."""
    if (settings.database_url is None and sys.stderr.isatty()
            and not (settings.home / "pg" / "PG_VERSION").exists()):
        print(f"factforge: creating a new database in FACTFORGE_HOME={settings.home} "
              "(set FACTFORGE_HOME to use another one)", file=sys.stderr)


def _memory(args: argparse.Namespace, **kw: Any) -> Any:
    from .memory import Memory

    settings = _settings(args)
    _announce_new_home(settings)
    return Memory(settings=settings, **kw)


# -- commands ---------------------------------------------------------------------------------------------


def cmd_extract(args: argparse.Namespace) -> int:
    from .rules.extract import Extractor
    from .settings import get_settings

    settings = get_settings()
    extractor = Extractor(settings, settings.patterns_dir)
    llm = None
    if not args.no_llm and settings.llm_enabled:
        from .models.llm import OllamaLLM

        llm = OllamaLLM(settings, gatekeeper=extractor.gate)
    if args.json:
        from .streams import extract_stream

        for out in extract_stream(sys.stdin, extractor, llm):
            _print_json(out)
            sys.stdout.flush()
        return 0
    if not args.text:
        raise SystemExit("factforge extract: give TEXT, or --json to read JSON lines on stdin")
    from .streams import extract_stream

    (out,) = list(extract_stream([json.dumps({"text": " ".join(args.text)})], extractor, llm))
    if "error" in out:
        raise FactforgeError(out["error"])
    gate = out["gate"]
    print(f"gate: {'passed' if gate['passed'] else 'dropped (' + str(gate['reason']) + ')'}"
          f"{'  · needs LLM' if out['needs_llm'] else ''}{'  · LLM: ' + out['llm_error'] if 'llm_error' in out else ''}")
    if out["facts"]:
        print(_table([(f["category"], f"{f['confidence']:.2f}", f["method"], f["rule"], f["content"])
                      for f in out["facts"]], ("category", "conf", "method", "rule", "fact")))
    else:
        print("no facts")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from .ingest import ingest_file

    with _memory(args, background=False) as memory:
        summary = ingest_file(memory, Path(args.file), show_progress=None if not args.quiet else False,
                              **({"batch_size": args.batch_size} if args.batch_size is not None else {}))
        out = summary.as_dict()
        llm_ok = True
        if args.wait_llm:  # one drain after the file, with progress and its outcome, rather than per line
            report, waiting = _drain(memory, limit=None, quiet=args.quiet or args.json)
            out["llm"] = {"report": to_jsonable(report), "queue": memory.queue_counts()}
            llm_ok = _llm_worked(report)
    if args.json:
        _print_json(out)
    else:
        _print_summary(out)
        if args.wait_llm:
            _print_drain(report, waiting, memory.settings)
    return 1 if (summary.errors and args.strict) or not llm_ok else 0


def _print_summary(s: dict[str, Any]) -> None:
    print(f"{s['lines']} lines: {s['turns']} turns, {s['activities']} activity sessions, "
          f"{s['duplicates']} already ingested, in {s['seconds']:.2f}s")
    cats = ", ".join(f"{k} {v}" for k, v in sorted(s["facts_by_category"].items())) or "none"
    # A fact said again is one more mention of the stored fact: `factforge stats` counts distinct facts.
    print(f"fact mentions extracted: {s['facts']} ({cats}); new distinct facts: {s['new_facts']}")
    drops = ", ".join(f"{k} {v}" for k, v in sorted(s["dropped_by_reason"].items())) or "none"
    print(f"messages dropped by the gatekeeper: {drops}")
    print(f"messages queued for the LLM: {s['queued_for_llm']}")
    for err in s["errors"]:
        print(f"skipped {err}", file=sys.stderr)


def _need_scope(args: argparse.Namespace, command: str) -> None:
    """Without --agent/--team a listing would show every agent's private facts: make that explicit."""
    if not (args.agent or args.team or args.all_scopes):
        raise SystemExit(f"factforge {command}: say whose view (--agent A --team T), or --all-scopes for every "
                         "agent's and team's facts")


def cmd_facts(args: argparse.Namespace) -> int:
    _need_scope(args, "facts")
    with _memory(args, llm=None, embedder=None, background=False) as memory:
        rows = memory.facts(
            agent_id=args.agent, team_id=args.team, categories=args.category or None,
            include_history=args.history, limit=args.limit,
            **({"as_of": _when(args.as_of)} if args.as_of else {}),
        )
    if args.json:
        for f in rows:
            _print_json(f)
        return 0
    print(_table([(f.category, f"{f.confidence:.2f}", f.visibility, f.agent_id, f.mention_count,
                   ("(superseded) " if f.superseded_at else "") + f.content) for f in rows],
                 ("category", "conf", "scope", "agent", "seen", "fact")) if rows else "no facts")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    _need_scope(args, "search")
    with _memory(args, llm=None, background=False) as memory:
        hits = memory.search(
            " ".join(args.query), agent_id=args.agent, team_id=args.team, k=args.k,
            categories=args.category or None, include_history=args.history, mode=args.mode,
            kinds=args.kind or None,
        )
    if args.json:
        for h in hits:
            _print_json(h)
        return 0
    print(_table([(i + 1, f"{h.fused_score:.4f}", h.vector_rank, h.bm25_rank, h.kind, h.category, _hit_date(h),
                   h.content) for i, h in enumerate(hits)],
                 ("#", "score", "vec", "bm25", "kind", "category", "date", "content"))
          if hits else "no results")
    return 0


def _hit_date(hit: Any) -> str:
    """The time a hit speaks of, in words ("the week before 9 June 2023"), else its stated validity, else when
    it was said."""
    when = hit.valid_from or hit.source_ts or hit.first_seen_at
    return hit.when or (f"{when:%Y-%m-%d}" if when else "")


def cmd_stats(args: argparse.Namespace) -> int:
    with _memory(args, llm=None, embedder=None, background=False) as memory:
        stats = memory.stats()
    if args.json:
        _print_json(stats)
        return 0
    labels = {"facts": "facts (distinct, current)", "superseded": "facts superseded (kept as history)",
              "turns": "turns stored", "llm_calls": "LLM calls (HTTP)", "llm_errors": "LLM calls failed",
              "llm_median_ms": "LLM median latency ms", "pattern_misses": "messages no pattern matched",
              "llm_share": "share of passing turns that needed the LLM", "queue": "LLM queue"}
    width = max(len(labels.get(k, k.replace("_", " "))) for k in stats)
    for key, value in stats.items():
        print(f"{labels.get(key, key.replace('_', ' ')):<{width}}  {_readable(to_jsonable(value))}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    selector = {k: v for k, v in (("fact_id", args.id), ("agent_id", args.agent), ("team_id", args.team),
                                  ("session_id", args.session), ("category", args.category), ("text", args.text))
                if v}
    if not selector:
        raise SystemExit("factforge forget: name what to forget (--id, --agent, --team, --session, --category, "
                         "--text)")
    if not (args.id or args.agent or args.team or args.session or args.all_scopes):
        # a filter alone would reach every agent's and team's facts
        raise SystemExit("factforge forget: --category/--text alone match every agent and team: add --agent, "
                         "--team or --session, or --all-scopes to mean it")
    with _memory(args, llm=None, embedder=None, background=False) as memory:
        count = memory.forget(dry_run=not args.yes, **selector)
    # forgetting an agent or a session also removes its stored messages (turns) and queued LLM work
    also = " with their stored turns and queued LLM work" if (args.agent or args.session) else ""
    if args.yes:
        print(f"{count} fact(s) deleted{also}")
    else:
        print(f"{count} fact(s) would be deleted{also}; re-run with --yes to delete them")
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from .storage import db

    settings = _settings(args)
    if args.action in ("status", "stop"):
        return _db_server(args.action, settings)
    _announce_new_home(settings)
    url = db.database_url(settings)
    if args.action == "upgrade":
        before, after = db.upgrade(url, settings)
        print(f"created the schema (revision {after})" if before is None else
              f"schema already up to date (revision {after})" if before == after else
              f"schema migrated from revision {before} to {after}")
    elif args.action == "downgrade":
        where = f"the embedded database in {settings.home}" if settings.database_url is None else db.safe_url(url)
        what = ("remove every table factforge created, with every fact, turn and queued item"
                if args.revision == "base" else f"migrate the schema down to revision {args.revision} (data "
                "of the newer revisions is lost)")
        if not args.yes and not _confirm(f"This will {what} in {where}."):
            raise SystemExit(f"factforge db downgrade: would {what} in {where}; re-run with --yes to do it")
        db.downgrade(url, args.revision)
        print(f"database schema downgraded to {args.revision}; the next factforge command that opens the "
              "database creates the schema again, empty" if args.revision == "base" else
              f"database schema downgraded to {args.revision}")
    elif args.action == "psql":
        from .storage.embedded import psql_path

        psql = psql_path()
        if psql is None:
            raise FactforgeError(f"psql is not installed; connect with any client to {db.conninfo(url)}")
        sys.stdout.flush()
        os.execv(psql, [psql, db.conninfo(url), *(["-c", args.command] if args.command else [])])
    else:
        print(db.conninfo(url))  # libpq form: psql, psycopg and every other client take it as it is
    return 0


def _confirm(question: str) -> bool:
    """Ask on a terminal; without one (a script, a pipe) the answer is no."""
    if not sys.stdin.isatty():
        return False
    return input(f"{question} Continue? [y/N] ").strip().lower() in ("y", "yes")


def _db_server(action: str, settings: Any) -> int:
    from .storage import embedded

    if settings.database_url is not None:
        from .storage.db import safe_url

        print(f"database: {safe_url(settings.database_url)} (FACTFORGE_DATABASE_URL), a server factforge "
              "neither starts nor stops")
        return 0 if action == "status" else 1
    if action == "stop":
        pid = embedded.stop_server(settings.home)
        print(f"stopped the embedded PostgreSQL of {settings.home} (pid {pid})" if pid else
              f"no embedded PostgreSQL runs for {settings.home}")
        return 0
    st = embedded.server_status(settings.home)
    print(f"home: {st.home} (FACTFORGE_HOME)")
    print(f"data: {st.pgdata}, {st.data_bytes / 2**20:,.0f} MB" if st.pgdata.is_dir() else
          f"data: {st.pgdata} (not created yet: the first command creates it)")
    if st.running:
        print(f"server: running, pid {st.pid}, since {st.started_at:%Y-%m-%d %H:%M:%S %Z}, shared_buffers "
              f"{st.shared_buffers or 'default'}")
        print(f"url: {st.url}")
    else:
        print("server: stopped (the next command starts it)")
    idle = settings.idle_stop
    print(f"idle stop: after {idle:g}s without a client (FACTFORGE_IDLE_STOP){', watcher pid ' + str(st.idle_watcher_pid) if st.idle_watcher_pid else ''}"
          if idle else "idle stop: off (FACTFORGE_IDLE_STOP=0); `factforge db stop` stops it")
    return 0


def cmd_llm_drain(args: argparse.Namespace) -> int:
    if args.action == "retry":
        with _memory(args, llm=None, embedder=None, background=False) as memory:
            n = memory.retry_failed()
        print(f"{n} failed item(s) back in the queue; run `factforge llm drain` to process them")
        return 0
    with _memory(args, background=False) as memory:
        report, waiting = _drain(memory, limit=args.limit, quiet=args.json)
        counts = memory.queue_counts()
    if args.json:
        _print_json({"report": report, "queue": counts, "waiting": waiting})
    else:
        _print_drain(report, waiting, memory.settings)
        print("queue: " + _readable(counts))
    return 0 if _llm_worked(report) else 1


def _drain(memory: Any, *, limit: int | None, quiet: bool) -> tuple[Any, list[dict[str, Any]]]:
    """Run the LLM over the due queue (a progress bar on a terminal); the report and what still waits."""
    from .ingest import Progress

    due = memory.queue_counts()["pending"]
    bar = Progress(min(due, limit or due), force=False if quiet else None, unit="items")
    try:
        report = memory.drain(limit=limit, progress=bar.update)
    finally:
        bar.close()
    return report, memory.queue_waiting()


def _llm_worked(report: Any) -> bool:
    """False when the LLM answered none of the items it was given (down, model missing, every call failed)."""
    return not report.errors or report.processed > report.failed + report.retried_later


def _print_drain(report: Any, waiting: list[dict[str, Any]], settings: Any) -> None:
    """The outcome of a drain, each failure with its cause."""
    if not settings.llm_enabled:
        print("LLM: off (FACTFORGE_LLM=off); queued messages wait for `factforge llm drain` with it on")
        return
    print(f"LLM: {report.processed} queued message(s) processed, {report.stored_facts} fact mention(s) stored, "
          f"{report.retried_later} back in the queue, {report.failed} failed for good")
    for cause, n in report.errors.items():
        print(f"  {n} x {cause}")
    if report.outage:
        print(f"  stopped: the rest waits in the queue; start Ollama ({settings.ollama_shown}) and run "
              "`factforge llm drain` again")
    if report.rejections:
        print("  reply items rejected by validation: " + _readable(report.rejections))
    for w in waiting:
        print(f"  {w['items']} item(s) wait until {w['next_try_at']:%H:%M:%S} (back-off) after: {w['error']}")


def cmd_patterns(args: argparse.Namespace) -> int:
    if args.action == "misses":
        with _memory(args, llm=None, embedder=None, background=False) as memory:
            misses = memory.top_misses(args.n)
        print(_table([(m.count, m.agents, f"{m.last_seen_at:%Y-%m-%d %H:%M}" if m.last_seen_at else "", m.text[:100])
                      for m in misses], ("count", "agents", "last seen", "message")) if misses else "no misses")
        return 0
    from .rules.load import default_rules
    from .rules.rulefile import full_speed_checks
    from .settings import get_settings

    if args.action == "check":
        full_speed_checks()  # time every regex against the adversarial strings, trusting no shipped verdict
    # Loading validates every rule file (facts, gate, injection, secrets, entities, turns, supersession).
    library = default_rules(get_settings().patterns_dir).library
    if args.action == "check":
        print(f"{len(library.rules)} rules load and pass their examples")
        return 0
    failures = library.check()
    for failure in failures:
        print(failure)
    print(f"{len(library.rules)} rules, {len(failures)} failing example(s)")
    return 1 if failures else 0


def cmd_embed(args: argparse.Namespace) -> int:
    from .models import embed

    if args.action == "graphs":
        with _memory(args, llm=None, embedder=None, background=False, check_embedder=False) as memory:
            built = memory.build_graphs(min_rows=args.min_rows)
        for b in built:
            print(f"{b.table}: {b.kind} {b.owner!r}: {b.rows} rows, {b.seconds:.1f}s ({b.index})")
        print(f"built {len(built)} graph(s)")
        return 0
    if args.min_rows is not None:
        raise FactforgeError("--min-rows is for `embed graphs`")
    embedder = embed.make_embedder(_settings(args))
    if embedder is None:
        raise FactforgeError("no embedder configured (FACTFORGE_EMBEDDER=none)")
    # Without the embedder check: `reset` is for a database that still holds another model's vectors.
    with _memory(args, llm=None, embedder=embedder, background=False, check_embedder=False) as memory:
        if args.action == "reset":
            memory.reset_embeddings()
        done = memory.embed_pending()
    print(f"embedded {done.facts} fact(s) and {done.episodes} episode(s) with {embedder.model}")
    return 0


def cmd_prompt(args: argparse.Namespace) -> int:
    from .rules.inline import inline_prompt

    print(inline_prompt())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job: ingest the bundled team chat, then show what was stored and search it."""
    from .ingest import ingest_file

    from .settings import bundled_dir

    path = Path(args.file) if args.file else bundled_dir("examples") / "team_chat.jsonl"
    with _memory(args, background=False) as memory:
        summary = ingest_file(memory, path, show_progress=False)
        _print_summary(summary.as_dict())
        if summary.queued:
            report, waiting = _drain(memory, limit=summary.queued, quiet=False)
            _print_drain(report, waiting, memory.settings)
        agent, team = args.agent, args.team
        rows = memory.facts(agent_id=agent, team_id=team, limit=50)
        print(f"\nfacts visible to agent {agent!r} in team {team!r}:")
        print(_table([(f.category, f"{f.confidence:.2f}", f.visibility, f.mention_count, f.content) for f in rows],
                     ("category", "conf", "scope", "seen", "fact")))
        for query in args.query or ["what do we use for caching", "null checks in PR reviews"]:
            hits = memory.search(query, agent_id=agent, team_id=team, k=3)
            print(f"\nsearch {query!r}:")
            for h in hits:
                print(f"  {h.fused_score:.4f}  {h.content}")
            if not hits:
                print("  no results")
    return 0


# -- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every command's help is what the README documents."""
    p = argparse.ArgumentParser(prog="factforge", description="Rules-first fact-extraction memory for AI agents.")
    p.add_argument("--database-url", help="PostgreSQL URL (default: FACTFORGE_DATABASE_URL or the embedded server)")
    from . import __version__

    p.add_argument("--version", action="version", version=f"factforge {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        return sp

    _add_writing_commands(add)
    _add_reading_commands(add)
    _add_admin_commands(add)
    from .cli_service import add_commands  # serve, keys, mcp, worker

    add_commands(add)
    return p


def _add_writing_commands(add: Add) -> None:
    """demo, extract, ingest."""
    sp = add("demo", cmd_demo, "Ingest the bundled example team chat, list the stored facts and search them.")
    sp.add_argument("--file", help="a JSON-lines file instead of examples/team_chat.jsonl")
    sp.add_argument("--agent", default="review-bot", help="agent whose view is shown (default review-bot)")
    sp.add_argument("--team", default="platform", help="team of that agent (default platform)")
    sp.add_argument("--query", action="append", help="a search to run (repeatable)")

    sp = add("extract", cmd_extract, "Extract facts from TEXT (or JSON lines on stdin with --json); no database.")
    sp.add_argument("text", nargs="*", help="the message to extract from")
    sp.add_argument("--json", action="store_true", help="read JSON lines {text|user,assistant,timestamp} on stdin")
    sp.add_argument("--no-llm", action="store_true", help="guarantee the LLM is never contacted")

    sp = add("ingest", cmd_ingest, "Ingest a JSON-lines file of turns or activity sessions (resumable, idempotent).")
    sp.add_argument("file", help="JSON lines: {user, assistant, agent_id, team_id, session_id, timestamp} or activity")
    sp.add_argument("--wait-llm", action="store_true", help="run the LLM on queued turns before returning")
    sp.add_argument("--json", action="store_true", help="print the summary as JSON")
    sp.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")
    sp.add_argument("--strict", action="store_true", help="exit 1 if any line was skipped as malformed")
    sp.add_argument("--batch-size", type=_positive, help="lines per transaction (default 200; 1 = one line per transaction)")


def _add_reading_commands(add: Add) -> None:
    """facts, search, stats, forget."""
    sp = add("facts", cmd_facts, "List the facts an agent may see (own private, its team's, global).")
    sp.add_argument("--agent", help="the agent whose view to show")
    sp.add_argument("--team", help="the agent's team")
    sp.add_argument("--category", action="append", choices=CATEGORIES, metavar="CATEGORY",
                    help=f"only this category (repeatable): {', '.join(CATEGORIES)}")
    sp.add_argument("--history", action="store_true", help="include superseded facts")
    sp.add_argument("--as-of", help="the facts that were valid at this ISO 8601 time")
    sp.add_argument("--limit", type=_positive, default=100, help="at most this many (default 100)")
    sp.add_argument("--all-scopes", action="store_true", help="every agent's and team's facts (an analyst's view)")
    sp.add_argument("--json", action="store_true", help="one JSON object per fact")

    sp = add("search", cmd_search, "Hybrid (vector + BM25) search over the facts and episodes an agent may see.")
    sp.add_argument("query", nargs="+", help="what to look for (web-search syntax: quotes, -exclude, or)")
    sp.add_argument("--agent", help="the searching agent")
    sp.add_argument("--team", help="the agent's team")
    sp.add_argument("-k", type=_positive, default=10, help="number of results (default 10)")
    sp.add_argument("--category", action="append", choices=CATEGORIES, metavar="CATEGORY",
                    help=f"only this category (repeatable): {', '.join(CATEGORIES)}")
    sp.add_argument("--history", action="store_true", help="include superseded facts")
    sp.add_argument("--mode", choices=("hybrid", "vector", "bm25"), default="hybrid", help="ranking (default hybrid)")
    sp.add_argument("--kind", action="append", choices=("fact", "episode"),
                    help="only facts or only episodes (stored turns); repeatable; default both")
    sp.add_argument("--all-scopes", action="store_true", help="search every agent's and team's facts")
    sp.add_argument("--json", action="store_true",
                    help="one JSON object per hit: kind, dates (valid_from/to, first/last seen, source time), "
                         "session, speaker and why it was found")

    sp = add("stats", cmd_stats, "Counts: facts by category and method, queue, LLM calls and tokens.")
    sp.add_argument("--json", action="store_true", help="print as JSON")

    sp = add("forget", cmd_forget, "Delete facts (a dry-run count unless --yes).")
    sp.add_argument("--id", help="one fact id")
    sp.add_argument("--agent", help="every fact of this agent")
    sp.add_argument("--team", help="every fact of this team (with --agent: that agent's facts in the team)")
    sp.add_argument("--session", help="every fact of this session")
    sp.add_argument("--category", choices=CATEGORIES, metavar="CATEGORY",
                    help="facts of this category (with the other selectors)")
    sp.add_argument("--text", help="facts whose content contains this text")
    sp.add_argument("--all-scopes", action="store_true",
                    help="let --category/--text without --agent/--team/--session reach every scope")
    sp.add_argument("--yes", action="store_true", help="really delete")


def _add_admin_commands(add: Add) -> None:
    """db, llm, patterns, embed, prompt."""
    sp = add("db", cmd_db, "Database: upgrade or downgrade the schema, print its URL, open psql, and see or stop "
             "the embedded server.")
    sp.add_argument("action", choices=("upgrade", "downgrade", "url", "psql", "status", "stop"),
                    help="upgrade/downgrade the schema; url: a libpq URL (psql, psycopg); psql: open psql on it; "
                         "status: what runs where; stop: stop the embedded server")
    sp.add_argument("revision", nargs="?", default="base", help="downgrade target (default base)")
    sp.add_argument("--yes", action="store_true", help="downgrade without asking")
    sp.add_argument("-c", "--command", help="psql: run this SQL and exit")

    sp = add("llm", cmd_llm_drain, "LLM queue: `llm drain` processes waiting work with backoff; `llm retry` "
             "puts failed items back in the queue.")
    sp.add_argument("action", choices=("drain", "retry"), help="drain: process the queue; retry: re-queue failed items")
    sp.add_argument("--limit", type=_positive, help="at most this many queue items")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")

    sp = add("patterns", cmd_patterns, "Pattern library: check (load), test (run examples), misses (what no rule caught).")
    sp.add_argument("action", choices=("check", "test", "misses"), help="check: load every rule; test: run every example; misses: what no rule caught")
    sp.add_argument("-n", type=_positive, default=20, help="how many misses to show (default 20)")

    sp = add("embed", cmd_embed, "Embeddings: backfill missing vectors, reset after changing the embedder, or give "
             "agents and teams with many vectors a vector graph of their own.")
    sp.add_argument("action", choices=("backfill", "reset", "graphs"),
                    help="backfill: embed facts without a vector; reset: switch to the configured embedder and "
                         "re-embed; graphs: build the missing agent and team graphs (searches and writes go on)")
    sp.add_argument("--min-rows", type=_positive,
                    help="graphs: for agents with at least this many private vectors in facts or episodes, and "
                         "teams with as many team ones (default FACTFORGE_AGENT_GRAPH_MIN_ROWS, else 4000, and "
                         "FACTFORGE_TEAM_GRAPH_MIN_ROWS, else 1000)")

    add("prompt", cmd_prompt, "Print the prompt snippet that teaches an agent's LLM the inline <ff:...> tags.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``factforge`` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # report it with the command's own usage, not the top level's
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.fn(args))
    except FactforgeError as exc:
        print(f"factforge: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("factforge: interrupted; what was stored is kept, and running the same command again resumes",
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
