#!/bin/sh
# The smallest Nexus adapter, in plain POSIX shell: `info` and `send` only (docs/adapters.md).
# Every block Nexus delivers is appended to $HOME/nexus-hello.log (or the first argument after
# the command). Register it from the repository root with an absolute path (a relative one is
# taken from NEXUS_HOME):
#   nexus adapters register hello --command "$PWD/examples/adapters/hello_adapter.sh /tmp/out.log"
#   nexus adapters enable hello/me && nexus adapters test hello/me --to me "hi"
log="${NEXUS_HELLO_LOG:-$HOME/nexus-hello.log}"
case "$1" in
  /*) log="$1"; shift ;;
esac
command="$1"; shift
case "$command" in
  info)
    printf '%s\n' '{"platform":"hello","name":"hello-sh","version":"1.0","supports":["send"],"platform_capabilities":{"text_limit":500}}'
    ;;
  send)
    to=""; text=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --to) to="$2"; shift 2 ;;
        --text) text="$2"; shift 2 ;;
        *) shift 2 ;;
      esac
    done
    printf '[%s] %s\n' "$to" "$text" >> "$log"
    id="hello-$(date +%s%N)"
    printf '{"success":true,"message_ids":["%s"],"chunks_sent":1}\n' "$id"
    ;;
  *)
    echo "hello_adapter: unsupported command '$command'" >&2
    exit 2
    ;;
esac
