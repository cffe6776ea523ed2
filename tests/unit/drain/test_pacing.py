"""F-11 self-pacing (``drain/pacing.py``): with no cap, a drain that meets 429s lowers its pace toward what the
container serves and raises it when the 429s stop; a cap stays the upper bound. Driven against a simulated
container (a token bucket of its own, ``served_ru_per_second``) on a simulated clock: nothing sleeps."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from airflow_chatter.drain.pacing import Pacer


@dataclass
class Simulation:
    """A drain's requests of ``cost`` RU, each ``latency`` long, against a container that serves
    ``served_ru_per_second`` (a second's worth banked) and answers 429 with the time until it could serve."""

    served_ru_per_second: float
    cap: float | None = None
    cost: float = 10.0
    latency: float = 0.005
    now: float = 0.0
    throttled: int = 0
    served: float = 0.0
    rates: list[tuple[float, float | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pacer = Pacer(self.cap, clock=lambda: self.now, sleep=self.sleep)
        self._tokens = self.served_ru_per_second
        self._refilled = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def run(self, seconds: float) -> None:
        """Send requests for ``seconds``; record what was served and the pace after each request."""
        self.throttled = 0
        self.served = 0.0
        self.rates = []
        end = self.now + seconds
        while self.now < end:
            self.pacer.wait()
            self.now += self.latency
            self._tokens = min(
                self.served_ru_per_second, self._tokens + (self.now - self._refilled) * self.served_ru_per_second
            )
            self._refilled = self.now
            if self._tokens >= self.cost:
                self._tokens -= self.cost
                self.served += self.cost
                self.pacer.spend(self.cost)
            else:
                self.throttled += 1
                self.pacer.throttled()
                self.sleep((self.cost - self._tokens) / self.served_ru_per_second)  # the 429's retry-after
            self.rates.append((self.now, self.pacer.rate))

    def mean_rate(self) -> float:
        """The pace over the last run, weighted by how long each held."""
        spans = [(b - a, r or 0.0) for (a, r), (b, _) in zip(self.rates, self.rates[1:], strict=False)]
        return sum(span * rate for span, rate in spans) / sum(span for span, _ in spans)


@pytest.mark.parametrize("served", [47.0, 417.0, 1000.0])
def test_f11_with_no_cap_the_self_paced_rate_settles_within_ten_percent_of_what_the_container_serves(
    served: float,
) -> None:
    """Unpaced, the drain would ask 2,000 RU/s (10 RU per 5 ms request); the container serves ``served``."""
    simulation = Simulation(served)
    assert simulation.pacer.rate is None, "no cap and no 429 yet: not paced"
    simulation.run(60.0)  # settling
    simulation.run(120.0)
    assert simulation.mean_rate() == pytest.approx(served, rel=0.10)
    assert simulation.served / 120.0 == pytest.approx(served, rel=0.10), "and the container is kept busy"
    assert simulation.throttled / 120.0 < 5, "a few 429s a second at most: the pace probes, it does not hammer"


def test_f11_the_pace_rises_again_when_the_429s_stop() -> None:
    simulation = Simulation(300.0)
    simulation.run(60.0)
    lowered = simulation.pacer.rate
    assert lowered is not None and lowered < 400
    simulation.served_ru_per_second = 1500.0  # the business load went away
    simulation.run(60.0)
    assert simulation.mean_rate() > 2 * lowered and simulation.served / 60.0 > 2 * 300


def test_f11_a_cap_stays_the_upper_bound_and_the_pace_goes_below_it_on_429s() -> None:
    under = Simulation(1000.0, cap=300.0)
    under.run(30.0)
    assert (under.throttled, under.pacer.rate) == (0, 300.0), "below what the container serves: the cap, no 429"
    assert under.served / 30.0 == pytest.approx(300, rel=0.05)
    over = Simulation(200.0, cap=1000.0)
    over.run(60.0)
    over.run(60.0)
    assert over.mean_rate() == pytest.approx(200, rel=0.10), "a cap above what is served: paced to what is served"
    assert max(rate or 0.0 for _, rate in over.rates) <= 1000.0
