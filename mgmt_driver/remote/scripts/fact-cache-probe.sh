#!/bin/sh
# kubespray-mgmt-effect: reads
# The state of the workspace's fact cache (mgmt_driver/remote/factcache.py).
#   fact-cache-probe ROOT CACHE_DIR HOST...
# ROOT the checkout, CACHE_DIR the workspace's jsonfile cache, HOST the
# inventory host names (checked by kubespray._host_names: no "/" or
# shell characters).  Prints FC:DOUBT:<why>, FC:TIMEOUT:<s>, FC:NOW:<epoch>
# and FC:ENTRY:<host>:<mtime>.  ansible.cfg's [defaults] keys are read
# with sed; the last assignment wins, as in Python's configparser with
# strict=False (Ansible's reader).
cd -- "$1" 2>/dev/null || { echo FC:DOUBT:no-checkout; exit 0; }
dir=$2
shift 2
key() {
  sed -n "s/^[[:space:]]*$1[[:space:]]*[=:][[:space:]]*//p" ansible.cfg \
    2>/dev/null | tail -n 1 | tr -d '\r'
}
[ -n "${ANSIBLE_CONFIG:-}" ] && echo FC:DOUBT:ANSIBLE_CONFIG
env | grep -Eq '^ANSIBLE_CACHE_PLUGIN_(TIMEOUT|PREFIX)=' &&
  echo FC:DOUBT:environment
echo "FC:TIMEOUT:$(key fact_caching_timeout)"
echo "FC:NOW:$(date +%s)"
for h in "$@"; do
  newest=
  for f in "$dir/$h" "$dir"/s[0-9]*_"$h"; do
    [ -f "$f" ] || continue
    m=$(stat -c %Y -- "$f" 2>/dev/null) || continue
    if [ -z "$newest" ] || [ "$m" -gt "$newest" ]; then newest=$m; fi
  done
  [ -n "$newest" ] && echo "FC:ENTRY:$h:$newest"
done
exit 0
