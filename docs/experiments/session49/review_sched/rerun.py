import sys
import fuzz1, fuzz2
mod = fuzz1 if sys.argv[1] == "1" else fuzz2
for sd in map(int, sys.argv[2:]):
    print(sd, mod.one(sd))
