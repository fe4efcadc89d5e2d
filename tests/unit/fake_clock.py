"""A clock for the waiting code's tests: call it for the time, and its sleep() moves the time on at once."""
from __future__ import annotations


class Clock:
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
