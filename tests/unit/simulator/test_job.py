"""The simulated job: conservation, batches, the Spark facts it models, driver failure."""

from __future__ import annotations

import pytest

from contracts.policy import ScalingPolicySpec
from contracts.trace import load_trace, parse_trace
from controller.simulator.baselines import Command, Current, Observation, Static
from controller.simulator.job import SimulatedJob
from controller.simulator.loop import run
from controller.simulator.model import JobModel
from controller.simulator.snapshots import Noise, build_snapshot, cpu_seconds

STEADY = parse_trace("t,load\n0,1\n120,1\n")


def job(trace=STEADY, executors: int = 2, partitions: int = 2, **kw) -> SimulatedJob:
    return SimulatedJob(
        JobModel(), trace, executors=executors, state_partitions=partitions, slo_seconds=30, **kw
    )


def test_conservation_at_every_step_through_scaling_restarts_and_failure() -> None:
    j = job(load_trace("traces/burst.csv"))
    plan = {40: ("scale", 6), 70: ("restart", 8), 150: ("kill", 0), 170: ("recover", 3)}
    for t in range(0, 301):
        j.advance(float(t))
        if t in plan:
            what, n = plan[t]
            if what == "scale":
                j.scale(n)
            elif what == "restart":
                j.restart(n, n)
            elif what == "kill":
                j.kill_driver()
            else:
                j.recover(n, 4)
        assert j.conservation_error() < 1e-6
        assert j.arrived() == pytest.approx(j.processed + j.backlog)
        assert j.processed <= j.taken + 1e-6 <= j.arrived() + 1e-3


def test_steady_batches_match_hand_computation() -> None:
    j = job()
    j.advance(60)
    b = j.batches[-1]
    # 10,000 records: 0.3 s overhead + 4 waves x 0.05 s (source) + 1 wave x 0.3 s (state)
    assert b.records == pytest.approx(10_000)
    assert b.end - b.start == pytest.approx(0.3 + 0.2 + 0.3)
    assert b.start == pytest.approx(round(b.start))  # on the 1 s trigger grid
    assert j.lag() == pytest.approx(1.0)  # the last second's records wait for the next trigger
    assert j.counters.slo_violation_seconds == 0
    assert j.counters.executor_seconds == pytest.approx(120)


def test_overrun_starts_the_next_batch_at_once() -> None:
    j = job(parse_trace("t,load\n0,2\n60,2\n"), executors=1, partitions=1)
    j.advance(30)
    a, b = j.batches[-2], j.batches[-1]
    assert b.start == pytest.approx(a.end)
    assert j.lag() > 5  # one executor cannot sustain load 2


def test_new_executors_help_only_stateless_stages_until_a_restart() -> None:
    j = job(parse_trace("t,load\n0,3\n200,3\n"), executors=2, partitions=8)
    j.advance(5)
    j.scale(8)
    j.advance(40)
    stateful = j.batches[-1].stages[1]
    assert stateful.slots == 2  # state stuck on the two executors that started the query
    assert j.batches[-1].stages[0].slots == 8
    j.restart(8, 8)
    j.advance(80)
    assert j.batches[-1].stages[1].slots == 8
    assert j.counters.restarts == 1 and j.counters.repartitions == 0  # same count: a restart


def test_executors_register_after_the_start_delay() -> None:
    j = job()
    j.advance(10)
    j.scale(4)
    assert (j.live(), j.requested) == (2, 4)
    j.advance(10 + JobModel().executor_start_seconds)
    assert j.live() == 4
    j.scale(1)  # scale-in takes effect at once
    assert (j.live(), j.requested, j.holders) == (1, 1, 1)


def test_repartition_downtime_is_restart_plus_state_over_speed() -> None:
    j = job()
    j.advance(20)
    j.restart(2, 4)
    j.advance(21)  # the batch in flight finished at 20.8
    stop = j.batches[-1].end
    expected = JobModel().repartition_seconds(j.processed, True)
    j.advance(60)
    assert j.counters.resumed[0] - stop == pytest.approx(expected)
    assert j.partitions == 4 and j.counters.repartitions == 1


@pytest.mark.parametrize("skips", [True, False])
def test_a_restart_gives_up_a_back_to_back_batch_where_the_sink_allows(skips: bool) -> None:
    """Batches that outlast the trigger leave no gap: the runner stops at once and the batch in
    flight is read again after the restart (restartSkipsBatch); otherwise the stop waits for
    its commit. No record is lost either way."""
    model = JobModel(restart_skips_batch=skips)
    j = SimulatedJob(model, parse_trace("t,load\n0,3\n120,3\n"), executors=1,
                     state_partitions=1, slo_seconds=30)  # fmt: skip
    j.advance(30)
    running = j.batch
    assert running is not None and running.end - running.start > model.trigger_seconds
    j.restart(2, 1)
    down_from = j.t if skips else running.end
    assert (j.batch is None) == skips
    j.advance(120)
    assert j.counters.resumed[0] == pytest.approx(
        max(down_from + model.restart_seconds, 30 + model.executor_start_seconds)
    )
    assert j.conservation_error() < 1e-6


def test_a_restart_waits_for_a_short_batch_even_where_the_sink_allows() -> None:
    j = job()
    j.advance(20.1)  # load 1 on two executors: 0.8 s batches, a gap after each
    running = j.batch
    assert running is not None
    j.restart(2, 4)
    assert j.batch is running  # the gap after it comes within a trigger


def test_killed_driver_loses_the_batch_and_waits_for_recover() -> None:
    j = job()
    j.advance(30.5)  # mid-batch
    processed = j.processed
    j.kill_driver()
    assert not j.driver_up and j.requested == 0 and j.taken == pytest.approx(processed)
    j.advance(90)
    assert j.processed == processed  # nothing runs without RECOVER
    j.recover(3, 2)
    j.advance(150)  # resumes at 100 (executors up), then one 32 s catch-up batch
    assert j.driver_up and j.processed > processed


def test_baselines_get_the_platform_restart() -> None:
    j = job(auto_recover=True)
    j.advance(30)
    j.kill_driver()
    j.advance(120)
    m = JobModel()
    assert j.counters.resumed[0] == pytest.approx(
        30 + m.failure_restart_seconds + max(m.restart_seconds, m.executor_start_seconds)
    )
    assert j.requested == 2


class RecoverWhenDown:
    """A fake autoscaler: RECOVER with 4 executors whenever the driver is down."""

    name, interval, window, auto_recover = "fake", 10.0, 30.0, False

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        if obs.snapshot.driver_up is False:
            return Command("recover", 4, cur.partitions, reason="RecoverFromFailure")
        return None


def test_chaos_run_recovers_and_catches_up() -> None:
    res = run(STEADY, JobModel(), ScalingPolicySpec(), RecoverWhenDown(), chaos=[45.0])
    assert [c.action for _, c in res.commands] == ["recover"]
    assert res.job.counters.failures == [45.0]
    assert res.job.counters.resumed and res.samples[-1].lag_seconds <= 2.0
    assert res.conservation_error < 1e-6
    down = [s for s in res.samples if not s.driver_up]
    assert down and all(s.executors == 0 for s in down)


def test_static_run_is_deterministic_and_conserves() -> None:
    a = run(STEADY, JobModel(), ScalingPolicySpec(), Static())
    b = run(STEADY, JobModel(), ScalingPolicySpec(), Static())
    assert a.samples == b.samples
    assert a.conservation_error < 1e-6


def test_snapshot_is_what_the_adapter_would_report() -> None:
    j = job()
    j.advance(60.5)
    s = build_snapshot(j, 60.5, 30.0, Noise(0.0, 0))
    assert s.batches == 30 and s.executors == 2 and s.driver_up
    assert s.arrival_rate == pytest.approx(10_000)
    assert s.processed_rate == pytest.approx(10_000)
    assert s.batch_duration_seconds == pytest.approx(0.8)
    assert s.overhead_seconds == pytest.approx(0.3)
    src, agg = s.stages
    assert (src.partitions, agg.partitions) == (8, 2)
    assert src.true_rate_per_slot() == pytest.approx(25_000)
    assert agg.true_rate_per_slot() == pytest.approx(1 / 6e-5)
    assert agg.state_bytes and agg.state_bytes > 0
    assert s.observed_at is not None and s.seconds_since_progress == pytest.approx(0.7)
    # CPU: 30 batches x 1 core-s of work over 2 executors
    assert cpu_seconds(j, 30.5, 60.5) == pytest.approx(30 * 10_000 * 1e-4, rel=0.02)


def test_snapshot_noise_is_seeded() -> None:
    j = SimulatedJob(JobModel(noise=0.1), STEADY, executors=2, state_partitions=2, slo_seconds=30)
    j.advance(40)
    a = build_snapshot(j, 40, 30, Noise(0.1, 3))
    b = build_snapshot(j, 40, 30, Noise(0.1, 3))
    assert a == b and a.processed_rate != pytest.approx(10_000, rel=1e-6)


@pytest.mark.parametrize("how", ["restart", "recover"])
def test_an_admission_cap_splits_the_pile_a_restart_finds(how: str) -> None:
    """What piled up while the job was down lands in one batch, unless the command that
    restarted it set a cap (records per batch), as the runner's source rate limit does."""
    pile: dict[int | None, list[float]] = {}
    for cap in (None, 20_000):
        j = job()
        j.advance(30.5)
        if how == "restart":
            j.restart(2, 2, cap)
        else:
            j.kill_driver()
            j.advance(60)
            j.recover(2, 2, cap)
        j.advance(150)
        resumed = j.counters.resumed[-1] if how == "restart" else 60
        pile[cap] = [b.records for b in j.batches if b.start >= resumed]
        assert j.conservation_error() < 1e-6
    assert pile[None][0] > 50_000  # the downtime's arrivals in one batch
    assert max(pile[20_000]) == pytest.approx(20_000)  # capped, drained in several
    assert pile[20_000][:3] == pytest.approx([20_000] * 3)
