#!/usr/bin/env bash
# Startup-to-API-ready time and idle resident memory of the real binary, the
# two figures docs/performance.md compares with IPA's.
#
# The agent runs standalone (no Ironic round trips) on 127.0.0.1:$PORT with
# the real inventory of this machine. "Ready" is the timestamp of the agent's
# "agent API listening" log line (ms precision), measured from just before
# the process is started, so no polling client competes for the CPU; the
# first GET /v1/status then checks it really answers. RSS is read from /proc
# after $IDLE seconds of idling. The load average is printed because on a
# shared machine it dominates the spread.
# The in-process benchmark with lookup and auto-TLS against a fake Ironic is
# `go test -bench StartupToAPIReady ./agent/`.
set -euo pipefail
cd "$(dirname "$0")/../.."
PORT=${PORT:-9170}
RUNS=${RUNS:-10}
IDLE=${IDLE:-3}
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'echo "startup.sh: failed at line $LINENO" >&2' ERR
go build -o "$tmp/ironic-agent" ./cmd/ironic-agent

times=()
for i in $(seq "$RUNS"); do
	start=$(date +%s%N)
	"$tmp/ironic-agent" run --standalone --listen-host 127.0.0.1 --listen-port "$PORT" \
		--kernel-cmdline "" --steps-dir "$tmp/no-steps" 2>"$tmp/agent.log" &
	pid=$!
	until grep -q 'msg="agent API listening"' "$tmp/agent.log"; do
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/agent.log" >&2; exit 1; }
		sleep 0.05
	done
	curl -sf "http://127.0.0.1:$PORT/v1/status" >/dev/null
	ts=$(grep -o 'time=[^ ]* level=INFO msg="agent API listening"' "$tmp/agent.log" | cut -d= -f2 | cut -d' ' -f1)
	end=$(date -d "$ts" +%s%N)
	times+=($(( (end - start) / 1000 )))
	if [ "$i" = "$RUNS" ]; then
		sleep "$IDLE"
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
median=${sorted[$(( RUNS / 2 ))]}
printf 'startup to API ready: median %d.%03d ms, min %d.%03d ms, max %d.%03d ms over %d runs\n' \
	$((median / 1000)) $((median % 1000)) $((sorted[0] / 1000)) $((sorted[0] % 1000)) \
	$((sorted[-1] / 1000)) $((sorted[-1] % 1000)) "$RUNS"
printf 'load average: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'idle RSS after %ss: %d KiB (%d.%d MiB)\n' "$IDLE" "$rss" $((rss / 1024)) $(( (rss % 1024) * 10 / 1024 ))
