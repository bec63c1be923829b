"""http_stages with the scheduler thread sleeping HANDOFF_SLEEP s after a pulse that gave some
task its first token (the event loop then has the GIL alone to send it): first token -> text
sent, ms, per turn (the .log's awk line).

    HANDOFF_SLEEP=0.001 PYTHONPATH=. python docs/experiments/session40/cpu/handoff_sleep.py
"""
import sys, time, os
import server.bench.http_stages as hs
SLEEP = float(os.environ.get("HANDOFF_SLEEP", "0"))
real_mark = hs._mark_scheduler
def mark(sched, records):
    real_mark(sched, records)
    real_pulse = sched._pulse
    def pulse():
        before = {s: len(sched.slots[s].output) for s in sched.decoding}
        real_pulse()
        if SLEEP and any(n == 0 and sched.slots[s] is not None and len(sched.slots[s].output) > 0
                         for s, n in before.items()):
            time.sleep(SLEEP)
    sched._pulse = pulse
hs._mark_scheduler = mark
hs.main(sys.argv[1:])
