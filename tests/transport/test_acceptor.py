"""The accept loop's bookkeeping: bursts logged once, admission caps per listener and peer."""

from __future__ import annotations

from choir.transport.acceptor import Admission, Burst


def test_a_burst_is_reported_at_its_start_with_the_size_of_the_one_before() -> None:
    burst = Burst(quiet_s=1.0)
    starts = [burst.note(t) for t in (0.0, 0.1, 0.5, 1.2, 5.0, 5.5)]
    # 0.0 starts a burst (nothing before); 0.1 and 0.5 join it; 1.2 is 0.7 after 0.5, so it
    # joins too; 5.0 starts the next, reporting the 4 of the first; 5.5 joins it
    assert starts == [0, None, None, None, 4, None]


def test_admission_caps_the_listener_and_each_peer() -> None:
    admission = Admission(max_total=3, max_per_peer=2)
    for peer in (1, 1, 2):
        assert admission.refusal(peer) is None
        admission.opened(peer)
    assert admission.refusal(3) is not None  # the listener is full
    admission.closed(2)
    assert admission.refusal(1) is not None  # peer 1 holds its two
    assert admission.refusal(3) is None
    admission.closed(1)
    assert admission.refusal(1) is None
    assert admission.total == 1


def test_without_a_per_peer_cap_only_the_total_counts() -> None:
    admission = Admission(max_total=2, max_per_peer=None)
    admission.opened(None)
    assert admission.refusal(None) is None
    admission.opened(None)
    assert admission.refusal(None) is not None
