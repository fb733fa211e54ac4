#!/usr/bin/env bash
# Shakes races out on purpose: runs the sandbox-launching suites N times, alone and under CPU load
# on every core (stress-ng), and after every pass checks that the host holds nothing of their
# sandboxes. Each failure is reported with its surefire reports and logs, kept under
# target/stress/. Run as root, after one build (`./mvnw -B install -DskipTests`):
#
#   tests/stress.sh [-n PASSES] [--load-only | --idle-only] [SUITE ...]
#
# SUITE is a folder under tests/ (default: e2e conformance sandbox escape). Exits 0 only if every
# pass of every suite passed and nothing was left behind.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

passes=3
modes=(idle load)
suites=()
while [ $# -gt 0 ]; do
  case $1 in
    -n) passes=$2; shift 2 ;;
    --load-only) modes=(load); shift ;;
    --idle-only) modes=(idle); shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# *//'; exit 0 ;;
    -*) echo "stress: unknown option $1" >&2; exit 2 ;;
    *) suites+=("$1"); shift ;;
  esac
done
[ ${#suites[@]} -gt 0 ] || suites=(e2e conformance sandbox escape)
[ "$(id -u)" = 0 ] || { echo "stress: run as root (the suites launch sandboxes)" >&2; exit 2; }
for s in "${suites[@]}"; do
  [ -f "tests/$s/pom.xml" ] || { echo "stress: no suite tests/$s" >&2; exit 2; }
done
if [[ " ${modes[*]} " == *" load "* ]] && ! command -v stress-ng >/dev/null 2>&1; then
  echo "stress: installing stress-ng"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null || { echo "stress: stress-ng is missing" >&2; exit 2; }
fi
JAVA_HOME=$(.ci/find-jdk)
export JAVA_HOME PATH="$JAVA_HOME/bin:$PATH"

out=target/stress/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
# What the host holds of sandboxes: run directories, id-range slots, cgroups, runtime temp dirs.
host_state() {
  { ls -1d /run/openshell/* /var/lib/openshell/id-slots/* /sys/fs/cgroup/unified/openshell-* \
      /tmp/openshell-sandbox* 2>/dev/null || true; } | sort
}
host_state >"$out/before"
failed=0
summary=()
for mode in "${modes[@]}"; do
  for ((pass = 1; pass <= passes; pass++)); do
    for suite in "${suites[@]}"; do
      load=
      if [ "$mode" = load ]; then
        stress-ng --cpu "$(nproc)" --timeout 3600s --quiet &
        load=$!
      fi
      start=$(date +%s)
      log="$out/$mode-$pass-$suite.log"
      ./mvnw -B -o -pl "tests/$suite" verify >"$log" 2>&1
      status=$?
      [ -n "$load" ] && { kill "$load" 2>/dev/null; wait "$load" 2>/dev/null; }
      took=$(( $(date +%s) - start ))
      host_state >"$out/after"
      left=$(comm -13 "$out/before" "$out/after")
      line="$mode pass $pass $suite: $([ $status = 0 ] && echo passed || echo FAILED) in ${took}s"
      if [ -n "$left" ]; then
        line="$line; LEFT BEHIND: $(echo "$left" | tr '\n' ' ')"
        status=1
      fi
      if [ $status != 0 ]; then
        failed=$((failed + 1))
        keep="$out/$mode-$pass-$suite"
        mkdir -p "$keep"
        cp -r "tests/$suite/target/surefire-reports" "$keep/" 2>/dev/null
        grep -E "FAIL|ERROR\]|Tests run:.*Fail" "$log" | head -20
      fi
      echo "stress: $line"
      summary+=("$line")
    done
  done
done
printf '%s\n' "${summary[@]}" >"$out/summary"
total=${#summary[@]}
echo "stress: $((total - failed)) passed, $failed failed (reports under $out)"
[ $failed = 0 ]
