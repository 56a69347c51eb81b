#!/usr/bin/env bash
# How long `make test` takes on a fresh clone of this checkout's HEAD, and whether it passes:
#   sudo bash bench/make_test_time.sh [RUNS] [DUTY]
# RUNS fresh clones (default 1), one after another, each in its own temporary directory (removed
# after), each `make test` timed as a whole (setup included). With DUTY (0-1), a second process
# keeps one core busy that share of the time during each run (bench/background_load.py, niced).
# Prints one line per run (wall time, exit status, the closing lines of both tiers) and keeps each
# run's output in /tmp/make-test-time.N.log. Exit status: 0 when every run passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1} duty=${2:-}
src=$(pwd -P) rev=$(git rev-parse --short HEAD)
fails=0
for i in $(seq 1 "$runs"); do
  dir=$(mktemp -d /tmp/make-test-time.XXXXXX) log=/tmp/make-test-time.$i.log
  git clone -q "$src" "$dir/interleave"
  load=""
  if [ -n "$duty" ]; then
    .venv/bin/python bench/background_load.py --duty "$duty" > "$log.load" 2>&1 &
    load=$!
  fi
  t0=$(date +%s%N)
  (cd "$dir/interleave" && make test) > "$log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  [ -n "$load" ] && { kill -TERM "$load"; wait "$load"; }
  [ "$rc" -eq 0 ] || fails=$((fails + 1))
  tiers=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$log" | sed 's/=//g; s/^ *//; s/ *$//' | paste -sd '|')
  printf 'run %d (%s%s): %s s, make test exit %d; %s%s\n' "$i" "$rev" "${duty:+, background duty $duty}" \
    "$(( (t1 - t0) / 1000000000 )).$(( (t1 - t0) / 100000000 % 10 ))" "$rc" "$tiers" "${load:+; $(cat "$log.load")}"
  rm -rf "$dir"
done
exit $((fails > 0))
