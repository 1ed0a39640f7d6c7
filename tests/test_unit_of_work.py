"""Store.unit_of_work(savepoints=False), the API's one-call transaction: no savepoint round trips, and a failing
call still leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event

from factforge.settings import Settings
from factforge.storage.store import Store


def test_a_one_call_unit_has_no_savepoint_and_rolls_back_whole(db_url: str, tmp_path: Path) -> None:
    store = Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                          "FACTFORGE_EMBEDDER": "none"}))
    sent: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
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
