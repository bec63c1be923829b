from common import *
from server.scheduler.cycle import SlotCycle
real = SlotCycle._resize
hits = []
def spy(self, cap, used):
    paused = [(i, used.index(i) if i in used else None) for i, t in enumerate(self.slots) if t is not None and getattr(t, "_forced_feed", False)]
    if paused: hits.append((self.capacity, cap, paused))
    return real(self, cap, used)
SlotCycle._resize = spy
import e3_resize_while_paused
print("resizes while a row was paused (cap from, to, [(old slot, new slot)]):", hits[:10], len(hits))
