"""A keep_state task: round 1 forced call (fast-forwarded), round 2 continued freely.
Compare bookkeeping (history/pending/current/rng_counter/penalties/state) with FF off."""
from common import *

def go(off, stop_at=None):
    ctx = ff_off() if off else None
    if ctx: ctx.__enter__()
    try:
        s = DynamicScheduler(L, max_batch_size=4, buffer_size=8)
        t = s.new_task(prompt(1), max_tokens=60, seed=5, presence_penalty=0.7,
                       repetition_penalty=0.3, penalty_decay=0.9, **SAMPLED)
        t.constraint = Constraint(CALL, L.tokenizer)
        s.run()
        r1 = list(t.output)
        t.continue_gen(L.encode("\n\nUser: again\n\nAssistant:"), max_tokens=20)
        s.add_task(t); s.run()
        return s, t, r1, list(t.output)
    finally:
        if ctx: ctx.__exit__()

sa, a, a1, a2 = go(False)
sb, b, b1, b2 = go(True)
print("steps on/off", sum(p['steps'] for p in sa.pulses), sum(p['steps'] for p in sb.pulses))
print("round1 equal", a1 == b1, len(a1))
print("round2 equal", a2 == b2)
print("history equal", a.history == b.history, len(a.history), len(b.history))
print("current", a.current_token, b.current_token, "pending", a.pending, b.pending)
print("rng_counter", a.rng_counter, b.rng_counter)
print("penalties max diff", float((a.penalties - b.penalties).abs().max()))
print("state max diff", float((a.state.wkv.float() - b.state.wkv.float()).abs().max()))
print("state_decoded", a.state_decoded, b.state_decoded)
