"""An adapter whose own words hold terminal control sequences: its ``info`` and its ``health`` error."""

import json
import sys

command = sys.argv[1]
if command == "info":
    info = {"platform": "x\u001b[31mRED\r\u001b[2Kfake", "version": "1\u001b[2J", "supports": ["send", "health"]}
    print(json.dumps(info))
elif command == "health":
    print(json.dumps({"connected": False, "error": "boom \u001b]0;pwn\u0007 \r\u001b[2Kok    all fine"}))
else:
    print(json.dumps({"success": True, "message_ids": ["\u001b[31mid"], "chunks_sent": 1}))
