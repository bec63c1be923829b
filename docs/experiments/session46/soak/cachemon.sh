while pgrep -f "qa/soak.py 1200" >/dev/null; do
  echo "$(date +%s) $(grep VmRSS /proc/32658/status | awk '{print $2}') $(curl -s localhost:8795/health | python3 -c "import json,sys;p=json.load(sys.stdin)['prefix_cache'];print(p['bytes'],p['entries'],p['evictions'])")" >> cache.log
  sleep 30
done
