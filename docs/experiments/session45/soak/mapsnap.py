import sys, re, collections
pid = sys.argv[1]; agg = collections.Counter(); n = collections.Counter(); cur = None
for line in open(f"/proc/{pid}/smaps"):
    if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
        parts = line.split(); name = parts[5] if len(parts) > 5 else "[anon]"
        lo, hi = [int(x, 16) for x in parts[0].split("-")]
        if name == "[anon]": name = "[anon >=60M]" if hi - lo >= 60 << 20 else "[anon <60M]"
        if not name.startswith("["): name = "file"
        cur = name; n[cur] += 1
    elif line.startswith("Rss:") and cur:
        agg[cur] += int(line.split()[1])
print({k: f"{v//1024}MiB/{n[k]}maps" for k, v in agg.most_common()})
