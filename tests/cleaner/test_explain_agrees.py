"""Property: what GET /api/cleaner says about eligibility is what the cleaner then does. Random appends, rolls,
clock moves and topic-config changes on a real log; after each step the explanation (with the cleaner thread asleep
in its backoff) says `cleaner_backoff` exactly when the next cleaning round cleans the log, and names a reason from
the rules of Kafka's LogCleanerManager otherwise."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from cleaner_env import COMPACT, Env, produce
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.cleaner.explain import cleaner_status
from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner
from tidelog.clock import ManualClock
from tidelog.config.log_config import LONG_MAX

produce_op = st.tuples(st.just("produce"), st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 4))
op = st.one_of(
    produce_op,
    produce_op,
    st.tuples(st.just("roll")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.sampled_from([0, 500, 1000, 5000])),
    st.tuples(st.just("config"), st.sampled_from([0.01, 0.5, 0.9]), st.sampled_from([0, 1000]),
              st.sampled_from([LONG_MAX, 3000])),
)
HELD = {"active_segment", "min_compaction_lag", "below_min_dirty_ratio", "none"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=25))
def test_explanation_agrees_with_the_next_round(ops: list[tuple]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-explain-"))
    env = Env(tmp / "data", ManualClock())
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1024 * 1024, backoff_ms=3_600_000), [env.path],
                         env.manager.all_logs, env.clock, checkpoint_store=env.manager)
    try:
        cleaner.startup()  # its first round finds no log and sleeps for an hour: rounds below are clean_once()
        deadline = time.monotonic() + 30
        while not all(t.ident in cleaner.manager.idle_threads for t in cleaner.threads):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        config = COMPACT
        log = env.log("t", config)
        for step in ops:
            if step[0] == "produce":
                for _ in range(step[2]):
                    produce(log, step[1], "v" * 50)
            elif step[0] == "roll":
                log.roll()
            elif step[0] == "advance":
                env.clock.advance(step[1])
            else:
                config = replace(config, min_cleanable_dirty_ratio=step[1], min_compaction_lag_ms=step[2],
                                 max_compaction_lag_ms=step[3])
                log.update_config(config)
            [row] = cleaner_status(cleaner)
            assert row.explanation.startswith("t-0: ")
            if row.blocked_by == "cleaner_backoff":
                assert row.blocked_until_ms is not None
                assert cleaner.clean_once(), row  # eligible: the round cleans it
                assert cleaner.history.get(log.topic_partition) is not None
            else:
                assert row.blocked_by in HELD, row
                assert not cleaner.clean_once(), row  # not eligible: the round leaves it
    finally:
        cleaner.shutdown()
        env.close()
        shutil.rmtree(tmp, ignore_errors=True)
