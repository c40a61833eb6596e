"""The process's one signal dispatcher: every subscriber hears each signal (real signals)."""

from __future__ import annotations

import signal

from app.plumbing.signals import SignalDispatcher


def test_every_subscriber_hears_a_signal_until_it_unsubscribes():
    dispatcher = SignalDispatcher()
    heard: list[str] = []
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        first = dispatcher.subscribe(signal.SIGUSR1, lambda: heard.append("first"))
        dispatcher.subscribe(signal.SIGUSR1, lambda: heard.append("second"))
        signal.raise_signal(signal.SIGUSR1)
        first()
        signal.raise_signal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert heard == ["first", "second", "second"]
