"""Store.unit_of_work(savepoints=False), the API's one-call transaction: no savepoint round trips, and a failing
call still leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from factforge.settings import Settings
from factforge.storage.store import Store


def test_a_one_call_unit_has_no_savepoint_and_rolls_back_whole(db_url: str, tmp_path: Path) -> None:
    store = Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                          "FACTFORGE_EMBEDDER": "none"}))
    sent: list[str] = []
    store.statement_listener = sent.append
    try:
        with store.unit_of_work(savepoints=False), store.atomic():
            store.upsert_session("s1", agent_id="a")
            assert store.record_turn("k1", session_id="s1", agent_id="a")
        assert not [s for s in sent if "SAVEPOINT" in s]
        assert store.turn_seen("k1")

        with pytest.raises(RuntimeError), store.unit_of_work(savepoints=False), store.atomic():
            store.upsert_session("s2", agent_id="a")
            store.record_turn("k2", session_id="s2", agent_id="a")
            raise RuntimeError("the call fails after its first writes")
        assert not store.turn_seen("k2")
        assert store._all("SELECT id FROM sessions WHERE id = 's2'") == []

        sent.clear()  # a batch of calls keeps its savepoints (one failing call, the others stay)
        with store.unit_of_work(), store.atomic():
            store.upsert_session("s3", agent_id="a")
        assert [s for s in sent if "SAVEPOINT" in s] == ["SAVEPOINT ff_call", "RELEASE SAVEPOINT ff_call"]
        assert store._all("SELECT turn_count FROM sessions WHERE id = 's1'") == [{"turn_count": 1}]
    finally:
        store.close()


def test_a_turn_is_recorded_with_its_fact_count_in_one_statement(db_url: str, tmp_path: Path) -> None:
    """The turn row gets the number of facts stored from it (implied ones included) when it is inserted, so a
    remembered turn sends no UPDATE of its turn afterwards."""
    from factforge.memory import Memory

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                  "FACTFORGE_EMBEDDER": "none", "FACTFORGE_LLM": "off"})
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        sent: list[str] = []
        m.store.statement_listener = sent.append
        switch = m.remember(user="We switched from JWT to Clerk for authentication", agent_id="dev",
                            team_id="platform", session_id="s1", user_name="Maria")
        plain = m.remember(user="The staging cluster keeps running out of memory at night, any idea why",
                           agent_id="dev", team_id="platform", session_id="s1")
        assert len(switch.facts) == 2 and plain.facts == ()  # the switch, and "Team uses Clerk" it implies
        assert not [s for s in sent if s.lstrip().upper().startswith("UPDATE TURNS")]
        # one transaction for the call with facts; the turn without any is one statement, sent alone (its queue
        # item and its miss ride in it), which the server commits as it ends: no BEGIN, no COMMIT
        assert sent.count("BEGIN") == sent.count("COMMIT") == 1
        alone = sent[sent.index("COMMIT") + 1:]
        assert len(alone) == 1 and "INSERT INTO extraction_queue" in alone[0] and "pattern_misses" in alone[0]
        assert m.store.queue_counts().get("pending") == 1 and [x.text for x in m.store.top_misses()] == [
            "The staging cluster keeps running out of memory at night, any idea why"]
        counts = {r["user_message"]: r["fact_count"] for r in m.store._all("SELECT user_message, fact_count FROM turns")}
        assert counts == {"We switched from JWT to Clerk for authentication": 2,
                          "The staging cluster keeps running out of memory at night, any idea why": 0}


def test_a_turn_alone_in_its_call_is_one_statement_but_a_batch_stays_one_transaction(db_url: str,
                                                                                       tmp_path: Path) -> None:
    """A turn with nothing to store after it goes alone (autocommit) only when its transaction holds that one
    call: in a batch every call joins the batch's transaction, which commits once, or rolls back whole."""
    from factforge.errors import DatabaseError
    from factforge.memory import Memory

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                  "FACTFORGE_EMBEDDER": "none", "FACTFORGE_LLM": "off"})
    texts = [f"The staging cluster number {i} keeps running out of memory at night" for i in range(3)]
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        sent: list[str] = []
        m.store.statement_listener = sent.append
        with m.store.unit_of_work(savepoints=False):  # as the API's Service does
            assert not m.remember(user=texts[0], agent_id="dev").facts
        assert len(sent) == 1 and "BEGIN" not in sent
        sent.clear()
        with m.batch():
            for text in texts[1:]:
                m.remember(user=text, agent_id="dev")
        assert sent.count("BEGIN") == sent.count("COMMIT") == 1
        with pytest.raises(DatabaseError), m.batch():
            m.remember(user="The build server restarts every night at two", agent_id="dev")
            with m.store._tx() as conn:
                conn.exec_driver_sql("SELECT 1 / 0")
        assert m.store._all("SELECT count(*) AS n FROM turns") == [{"n": 3}]
        assert m.store.queue_counts().get("pending") == 3


def test_a_read_before_the_write_goes_alone_and_a_batch_reads_its_own_turns(db_url: str, tmp_path: Path) -> None:
    """A bare reply reads the assistant message it answers before its turn is written. Sent while its transaction
    has sent nothing, that read goes alone (autocommit) and the turn after it still can: two statements, no BEGIN
    and COMMIT. Inside a batch that has begun, the read runs in the batch's transaction and sees its turns."""
    from factforge.memory import Memory

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                  "FACTFORGE_EMBEDDER": "none", "FACTFORGE_LLM": "off"})
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        m.remember(user="Which city do you think I live in?", assistant="You live in Denver, right?",
                   agent_id="dev", session_id="s1")
        sent: list[str] = []
        m.store.statement_listener = sent.append
        with m.store.unit_of_work(savepoints=False):  # as the API's Service does
            plain = m.remember(user="Sure is", agent_id="dev", session_id="nothing-said-before")
        assert plain.facts == ()
        assert len(sent) == 2 and "BEGIN" not in sent and "assistant_message FROM turns" in sent[0]
        sent.clear()
        with m.store.unit_of_work(savepoints=False):
            confirmed = m.remember(user="yes", agent_id="dev", session_id="s1")
        assert [f.content for f in confirmed.facts] == ["User lives in Denver"]
        assert "assistant_message FROM turns" in sent[0] and sent[1] == "BEGIN" and sent[-1] == "COMMIT"
        with m.batch():  # the reply it confirms is the batch's own, not yet committed
            m.remember(user="Which editor am I using?", assistant="You use Neovim, right?", agent_id="dev",
                       session_id="s2")
            batched = m.remember(user="yes", agent_id="dev", session_id="s2")
        assert [f.content for f in batched.facts] == ["User uses Neovim"]
        assert m.store.turn_seen(m.store._all("SELECT key FROM turns WHERE session_id = 's2' LIMIT 1")[0]["key"])
