"""Versioned schema of ``agents.db`` (``PRAGMA user_version``) and its migrations.

Layout choices that keep history loads fast and storage flat (see docs/ledger.md):

* Every turn has a position ``(segment_id, seq)``: ``seq`` is its depth; a turn whose parent is
  the last turn of its segment continues that segment, any other child (a fork) opens a new
  segment that records ``(parent_segment_id, parent_seq)``. An ancestry is therefore a few
  segment ranges, not a recursive walk of every turn.
* ``messages`` and ``tool_calls`` are keyed by an integer packing ``(segment_id, seq, ordinal)``
  (see ``pack_key``), so the messages of an ancestry are a handful of rowid range scans and
  need no secondary index at all.
* ``threads`` is a view over ``turns`` (one thread per turn): depth and the ancestry token total
  are stored on the turn; the ancestry itself is never stored (it would be O(N^2)).
"""

from __future__ import annotations

from nexus.ledger._schema_overflow import QUEUE_OVERFLOW

SEG_SHIFT = 36
SEQ_SHIFT = 14
MAX_ORDINAL = (1 << SEQ_SHIFT) - 1
MAX_SEQ = (1 << (SEG_SHIFT - SEQ_SHIFT)) - 1
MAX_SEGMENT = (1 << (63 - SEG_SHIFT)) - 1


def pack_key(segment_id: int, seq: int, ordinal: int) -> int:
    """The integer key of message/tool-call ``ordinal`` of the turn at ``(segment_id, seq)``."""
    return (segment_id << SEG_SHIFT) | (seq << SEQ_SHIFT) | ordinal


def unpack_key(key: int) -> tuple[int, int, int]:
    """Inverse of :func:`pack_key`: ``(segment_id, seq, ordinal)``."""
    return key >> SEG_SHIFT, (key >> SEQ_SHIFT) & MAX_SEQ, key & MAX_ORDINAL


_V1 = """
CREATE TABLE segments (
  id INTEGER PRIMARY KEY,
  parent_segment_id INTEGER REFERENCES segments(id),
  parent_seq INTEGER,
  root_turn_id TEXT NOT NULL
);
CREATE INDEX segments_parent ON segments(parent_segment_id, parent_seq) WHERE parent_segment_id IS NOT NULL;

CREATE TABLE turns (
  id TEXT PRIMARY KEY,
  parent_turn_id TEXT REFERENCES turns(id),
  segment_id INTEGER NOT NULL REFERENCES segments(id),
  seq INTEGER NOT NULL,
  session_label TEXT NOT NULL,
  turn_type TEXT NOT NULL DEFAULT 'normal' CHECK (turn_type IN ('normal', 'compaction')),
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'streaming', 'completed', 'failed', 'aborted')),
  started_at INTEGER NOT NULL,
  completed_at INTEGER,
  model TEXT,
  provider TEXT,
  role TEXT NOT NULL DEFAULT 'unified',
  toolset_name TEXT,
  tools_available TEXT,
  permissions_granted TEXT,
  permissions_used TEXT,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cached_input_tokens INTEGER NOT NULL DEFAULT 0,
  cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  reasoning_tokens INTEGER NOT NULL DEFAULT 0,
  total_tokens INTEGER NOT NULL DEFAULT 0,
  thread_total_tokens INTEGER NOT NULL DEFAULT 0,
  cost REAL,
  query_count INTEGER NOT NULL DEFAULT 0,
  message_count INTEGER NOT NULL DEFAULT 0,
  response_ordinal INTEGER,
  has_children INTEGER NOT NULL DEFAULT 0,
  tool_call_count INTEGER NOT NULL DEFAULT 0,
  stop_reason TEXT,
  error_json TEXT,
  run_id TEXT,
  source_event_id TEXT,
  workspace_path TEXT,
  persona_id TEXT,
  system_prompt_hash TEXT,
  owner TEXT,
  metadata_json TEXT,
  UNIQUE (segment_id, seq)
);
CREATE INDEX turns_open ON turns(status) WHERE status IN ('pending', 'streaming');
CREATE INDEX turns_compaction ON turns(segment_id, seq) WHERE turn_type = 'compaction';
CREATE INDEX turns_source_event ON turns(source_event_id) WHERE source_event_id IS NOT NULL;

CREATE TABLE messages (
  key INTEGER PRIMARY KEY,
  role TEXT NOT NULL,
  body TEXT NOT NULL,
  source TEXT,
  context_json TEXT,
  metadata_json TEXT
);

CREATE TABLE tool_calls (
  key INTEGER PRIMARY KEY,
  call_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  message_key INTEGER,
  result_key INTEGER,
  status TEXT NOT NULL DEFAULT 'completed',
  error TEXT,
  spawned_session_label TEXT,
  started_at INTEGER NOT NULL,
  completed_at INTEGER
);
CREATE INDEX tool_calls_spawned ON tool_calls(spawned_session_label) WHERE spawned_session_label IS NOT NULL;

CREATE TABLE turn_journal (
  turn_id TEXT NOT NULL REFERENCES turns(id),
  ordinal INTEGER NOT NULL,
  kind TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (turn_id, ordinal)
) WITHOUT ROWID;

CREATE TABLE compactions (
  turn_id TEXT PRIMARY KEY REFERENCES turns(id),
  summary TEXT NOT NULL,
  summarized_through_turn_id TEXT NOT NULL,
  first_kept_turn_id TEXT,
  turns_summarized INTEGER NOT NULL DEFAULT 0,
  compaction_type TEXT NOT NULL DEFAULT 'summary',
  model TEXT NOT NULL,
  provider TEXT,
  tokens_before INTEGER NOT NULL DEFAULT 0,
  tokens_after INTEGER NOT NULL DEFAULT 0,
  summary_tokens INTEGER NOT NULL DEFAULT 0,
  summarization_input_tokens INTEGER NOT NULL DEFAULT 0,
  summarization_output_tokens INTEGER NOT NULL DEFAULT 0,
  duration_ms INTEGER NOT NULL DEFAULT 0,
  trigger TEXT NOT NULL DEFAULT 'context_limit',
  metadata_json TEXT
);

CREATE TABLE sessions (
  label TEXT PRIMARY KEY,
  thread_id TEXT REFERENCES turns(id),
  persona_id TEXT NOT NULL DEFAULT 'default',
  is_subagent INTEGER NOT NULL DEFAULT 0,
  parent_session_label TEXT,
  parent_turn_id TEXT,
  spawn_tool_call_id TEXT,
  task_description TEXT,
  task_status TEXT,
  routing_key TEXT,
  origin TEXT NOT NULL DEFAULT 'user',
  origin_session_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'deleted')),
  metadata_json TEXT
);
CREATE INDEX sessions_updated ON sessions(updated_at DESC);
CREATE INDEX sessions_parent ON sessions(parent_session_label) WHERE parent_session_label IS NOT NULL;
CREATE INDEX sessions_routing ON sessions(routing_key) WHERE routing_key IS NOT NULL;
CREATE INDEX sessions_thread ON sessions(thread_id);

CREATE TABLE session_history (
  id INTEGER PRIMARY KEY,
  session_label TEXT NOT NULL REFERENCES sessions(label),
  thread_id TEXT,
  changed_at INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT 'write'
);
CREATE INDEX session_history_label ON session_history(session_label, changed_at);

CREATE TABLE session_aliases (
  alias TEXT PRIMARY KEY,
  session_label TEXT NOT NULL REFERENCES sessions(label),
  created_at INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT 'manual'
);

CREATE TABLE queue_items (
  id TEXT PRIMARY KEY,
  session_label TEXT NOT NULL REFERENCES sessions(label),
  message_json TEXT NOT NULL,
  mode TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'queued',
  enqueued_at INTEGER NOT NULL,
  started_at INTEGER,
  completed_at INTEGER,
  error TEXT
);
CREATE INDEX queue_items_session ON queue_items(session_label, status, enqueued_at);
CREATE INDEX queue_items_status ON queue_items(status, enqueued_at);

CREATE VIEW threads AS
  SELECT t.id AS turn_id, t.parent_turn_id AS parent_turn_id, s.root_turn_id AS root_turn_id,
         t.seq AS depth, t.thread_total_tokens AS total_tokens, t.persona_id AS persona_id,
         t.system_prompt_hash AS system_prompt_hash, t.id AS thread_key
  FROM turns t JOIN segments s ON s.id = t.segment_id;
"""

_V2 = """
CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL DEFAULT 'unified',
  persona_id TEXT,
  session_label TEXT,
  config_json TEXT,
  status TEXT NOT NULL DEFAULT 'active',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE broker_messages (
  id TEXT PRIMARY KEY,
  from_agent TEXT,
  to_agent TEXT NOT NULL,
  session_label TEXT,
  content TEXT NOT NULL,
  reply_to TEXT,
  wait_for_reply INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'sent',
  created_at INTEGER NOT NULL,
  metadata_json TEXT
);
CREATE INDEX broker_messages_to ON broker_messages(to_agent, created_at);

ALTER TABLE queue_items ADD COLUMN turn_id TEXT;
ALTER TABLE queue_items ADD COLUMN metadata_json TEXT;
"""

_V3 = """
CREATE TABLE origins (
  id INTEGER PRIMARY KEY,
  api TEXT NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  UNIQUE (api, provider, model)
);
"""
"""Version 3: message bodies in the ledger's compact form (see ``_decode``); assistant messages
refer to their interned ``(api, provider, model)``. Version-2 bodies stay readable as they are."""

_V4 = """
CREATE VIEW spec_messages AS
  SELECT m.key AS id, t.id AS turn_id,
         CASE m.role WHEN 'tool_result' THEN 'tool' ELSE m.role END AS role,
         CASE WHEN json_type(m.body, '$.c') = 'text' THEN json_extract(m.body, '$.c')
              WHEN json_type(m.body, '$.content') = 'text' THEN json_extract(m.body, '$.content')
              ELSE (SELECT group_concat(CASE WHEN j.type = 'text' THEN j.value
                                             WHEN json_extract(j.value, '$.type') = 'text'
                                             THEN json_extract(j.value, '$.text') END, '')
                    FROM json_each(m.body, CASE WHEN json_type(m.body, '$.c') IS NOT NULL THEN '$.c'
                                                ELSE '$.content' END) j) END AS content,
         m.source AS source, m.key & 16383 AS sequence,
         COALESCE(json_extract(m.body, '$.t'), json_extract(m.body, '$.timestamp')) AS created_at,
         (SELECT group_concat(json_extract(j.value, '$.thinking'), '')
          FROM json_each(m.body, CASE WHEN json_type(m.body, '$.c') IS NOT NULL THEN '$.c' ELSE '$.content' END) j
          WHERE j.type = 'object' AND json_extract(j.value, '$.type') = 'thinking') AS thinking,
         m.context_json AS context_json, m.metadata_json AS metadata_json, m.body AS body
  FROM messages m JOIN turns t ON t.segment_id = (m.key >> 36) AND t.seq = ((m.key >> 14) & 4194303);

CREATE VIEW spec_tool_calls AS
  SELECT c.call_id AS id, t.id AS turn_id, c.message_key AS message_id, c.tool_name AS tool_name,
         (c.key & 16383) + 1 AS tool_number,
         COALESCE(
           (SELECT CASE WHEN j.type = 'array' THEN json_extract(j.value, '$[2]')
                        ELSE json_extract(j.value, '$.arguments') END
            FROM json_each(a.body, CASE WHEN json_type(a.body, '$.c') IS NOT NULL THEN '$.c' ELSE '$.content' END) j
            WHERE (j.type = 'array' AND json_extract(j.value, '$[0]') = c.call_id)
               OR (j.type = 'object' AND json_extract(j.value, '$.type') = 'tool_call'
                   AND json_extract(j.value, '$.id') = c.call_id)
            LIMIT 1), '{}') AS params_json,
         r.body AS result_json, c.error AS error, c.status AS status,
         c.spawned_session_label AS spawned_session_label, c.started_at AS started_at,
         c.completed_at AS completed_at, c.key & 16383 AS sequence
  FROM tool_calls c
  JOIN turns t ON t.segment_id = (c.key >> 36) AND t.seq = ((c.key >> 14) & 4194303)
  LEFT JOIN messages a ON a.key = c.message_key
  LEFT JOIN messages r ON r.key = c.result_key;
"""
"""Version 4: read-only views with the reference schema's column names (``spec_messages``,
``spec_tool_calls``) for SQL tools and reports; the tables keep their compact layout."""

_V5 = """
ALTER TABLE turn_journal ADD COLUMN slot INTEGER;
"""
"""Version 5: a journal entry can have a ``slot`` (one per assistant message of the turn) that
``journal_partial`` overwrites in place while the message streams; other entries leave it NULL.
No index: a turn's few entries are found by the primary key's ``turn_id`` prefix, and an index
page would be one more page written per journal entry."""

_BROKER = """
ALTER TABLE queue_items ADD COLUMN agent_id TEXT;
ALTER TABLE queue_items ADD COLUMN message_id TEXT;
ALTER TABLE queue_items ADD COLUMN sender TEXT;
ALTER TABLE queue_items ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX queue_items_message ON queue_items(message_id) WHERE message_id IS NOT NULL;
CREATE INDEX queue_items_agent ON queue_items(agent_id, status, enqueued_at) WHERE agent_id IS NOT NULL;
"""
"""Broker queues: an item names its agent and the message id it carries (unique, so ``send`` is
idempotent), its sender, and how many runs have taken it (``attempts``: a run cut by a crash
is retried a bounded number of times, then the item fails with its reason)."""

_PROMPTS = """
CREATE TABLE system_prompts (
  hash TEXT PRIMARY KEY,
  text TEXT NOT NULL,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;
"""
"""What the model was told, auditable per turn: each distinct system prompt is stored once, keyed by
its SHA-256 (``turns.system_prompt_hash`` points here); the assembly metadata goes into the query
message's ``context_json`` and its origin into ``messages.source`` (both columns exist since version 1,
and were left NULL by the engine until this version)."""

_DELIVERIES = """
CREATE TABLE deliveries (
  id TEXT PRIMARY KEY,
  turn_id TEXT REFERENCES turns(id),
  queue_item_id TEXT,
  session_label TEXT NOT NULL,
  run_id TEXT,
  adapter TEXT NOT NULL,
  account_id TEXT NOT NULL,
  target_json TEXT NOT NULL,
  path TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('delivered', 'partial', 'failed')),
  message_ids_json TEXT NOT NULL DEFAULT '[]',
  error TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  blocks_sent INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL
);
CREATE INDEX deliveries_turn ON deliveries(turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX deliveries_session ON deliveries(session_label, completed_at);
"""
"""Where a reply went (seed 004): one row per delivery of a run to an adapter target, written when the
delivery ends and after its turn (a turn never waits on an adapter): the adapter/account, the target,
the path (``native | blocks | none``), ``delivered | partial | failed``, the platform's message ids, the
error and how many ``send`` calls it took. ``turn_id`` is NULL when the run wrote no turn."""

OPEN_TURNS = "status IN ('pending', 'streaming')"
"""The turns still open (being run, or left by a dead process until recovered), spelled as ``turns_open`` is."""

PENDING = "status IN ('queued', 'processing')"
"""The unfinished queue items, spelled exactly as :data:`_QUEUE_INDEXES` does: SQLite uses a partial
index only for a query whose WHERE clause contains the index's condition term for term. Two values,
not three: SQLite turns a longer ``IN`` list into a temporary table built at every execution of the
statement, and the index's condition runs with every insert and status change (8 % of the queue
path's CPU with ``failed`` added, measured)."""

_QUEUE_INDEXES = f"""
DROP INDEX queue_items_status;
DROP INDEX queue_items_session;
DROP INDEX queue_items_agent;
CREATE INDEX queue_items_pending ON queue_items(status, enqueued_at) WHERE {PENDING};
CREATE INDEX queue_items_failed ON queue_items(agent_id, enqueued_at) WHERE status = 'failed';
CREATE INDEX queue_items_agent ON queue_items(agent_id, enqueued_at) WHERE agent_id IS NOT NULL;
"""
"""Version 9: ``queue_items`` keeps status indexes of its unfinished and its failed items only. Three
indexes used to carry ``status``, so each message's claim and delivery moved an entry in all three,
and they kept every delivered item forever. Now a finished item leaves the small
``queue_items_pending`` index (start-up reload, ``fail_exhausted``), failed items have their own
(``nexus queue list`` shows them by default), and the per-agent index (an agent's whole history) no
longer holds the status, so it is written once, at accept. The per-session index had no reader left:
the ledger's per-session pending list goes through the pending index. The queue path got ~17 % cheaper
in CPU per message (docs/benchmarks.md)."""

_REPLY_OF = "CASE WHEN json_valid(message_json) THEN json_extract(message_json, '$.metadata.reply_to') END"
"""The agent a stored message asked to answer later (``NULL`` also for a row whose JSON is damaged)."""

_AWAITED_REPLIES = f"""
ALTER TABLE queue_items ADD COLUMN awaits_reply INTEGER;
UPDATE queue_items SET awaits_reply = 1 WHERE {_REPLY_OF} IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM queue_items r WHERE r.message_id = queue_items.message_id || ':reply');
CREATE INDEX queue_items_awaiting_reply ON queue_items(enqueued_at) WHERE awaits_reply = 1;
"""
"""Version 10: the messages still waiting for the reply their sender asked for later (``metadata.reply_to``)
are flagged and indexed. A broker's start looks for delivered ones whose reply was never queued (a
crash between the turn and the reply); it walked every queue item ever accepted to find them, ~0.3 s
per million. The flag is set at accept and cleared in the transaction that accepts the reply, so the
start-up walk reads only the unanswered few."""

_NO_AGENT_HISTORY_INDEX = """
DROP INDEX queue_items_agent;
"""
"""Version 11: no index of every agent's whole queue history. Each accept inserted an entry into it at
its agent's place, a page of its own per agent in a group commit, so at 100 agents it was about a
quarter of the pages the queue path wrote and its cost grew with the table: 89.6 -> 77.9 us of CPU per
message in a burst of 20,000, and at a sustained 10,000 msg/s the broker kept up again (8,603 -> 9,768
msg/s delivered, p99 accept 4.4 -> 1.6 ms; docs/benchmarks.md). Its one reader, an agent's full history
(``nexus queue list AGENT --all``), scans the table instead (~0.2 s per million items); waiting and
failed items keep their own small indexes."""

_CLAIM_OWNER = """
ALTER TABLE queue_items ADD COLUMN claimed_by TEXT;
"""
"""Version 12: a claimed item names the broker running it (``host:pid`` and its start time). A second broker on the same
database (a lock file removed while held, a name of the database its lock does not see) reloaded the
first one's ``processing`` items as a crash leaves them and ran them again; now a claim takes such
an item only when its broker is gone (``nexus.ledger._claims``). No index: the claim reads it by id."""

_ROUTING = """
CREATE TABLE route_checkpoints (
  id INTEGER PRIMARY KEY,
  turn_id TEXT NOT NULL UNIQUE,
  turn_rowid INTEGER NOT NULL,
  session_label TEXT NOT NULL,
  agent_id TEXT,
  parent_turn_id TEXT,
  segment_id INTEGER NOT NULL,
  position INTEGER NOT NULL,
  status TEXT NOT NULL,
  quality REAL NOT NULL,
  link REAL NOT NULL DEFAULT 0,
  completed_at INTEGER NOT NULL,
  context TEXT NOT NULL,
  files_json TEXT NOT NULL DEFAULT '[]',
  indexed_at INTEGER NOT NULL
);
CREATE VIRTUAL TABLE route_fts USING fts5(ask, reply, files, content='', tokenize='unicode61');
CREATE VIRTUAL TABLE route_vocab USING fts5vocab(route_fts, 'row');
CREATE TABLE route_vectors (
  checkpoint_id INTEGER PRIMARY KEY REFERENCES route_checkpoints(id),
  embedder TEXT NOT NULL,
  vector BLOB NOT NULL
);
CREATE TABLE route_decisions (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  task TEXT NOT NULL,
  agent_id TEXT,
  conversation_id TEXT,
  routing_mode TEXT NOT NULL,
  arm TEXT NOT NULL,
  decision TEXT NOT NULL CHECK (decision IN ('existing', 'new', 'explicit')),
  turn_id TEXT,
  confidence REAL NOT NULL,
  alternatives_json TEXT NOT NULL DEFAULT '[]',
  embedder TEXT,
  took_ms REAL,
  session_label TEXT,
  message_id TEXT,
  outcome_status TEXT,
  outcome_turns INTEGER,
  outcome_tokens INTEGER,
  outcome_cost REAL,
  outcome_at INTEGER,
  feedback INTEGER,
  feedback_note TEXT
);
CREATE INDEX route_decisions_created ON route_decisions(created_at);
CREATE INDEX route_decisions_unsettled ON route_decisions(created_at)
  WHERE outcome_at IS NULL AND message_id IS NOT NULL;
CREATE TABLE route_state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
"""
"""Version 13: smart routing (``nexus.routing``). ``route_checkpoints`` holds one row per closed turn the
index has seen: where it is (session, segment and position, parent), its agent, its quality, how closely
it continues its parent's work (``link``: similar text, same files), the short ``context`` text derived
from it and the files its tools touched with their size, mtime and hash as the index first saw them
(freshness compares the disk against these). ``route_fts`` is a contentless FTS5 table (BM25 over the
request, the reply's gist and the file paths, as stemmed words; rowid = the checkpoint's id) and
``route_vocab`` its vocabulary (document frequencies); ``route_vectors`` holds the embeddings (float32,
one row per checkpoint, with the embedder that made them). ``route_decisions`` records every routing
decision and, later, its run's outcome and feedback (A/B). ``route_state`` keeps the indexing
watermark. The ledger itself reads none of these: dropping them loses only what ``nexus route reindex``
rebuilds (and the decisions)."""

_SESSION_LEASES = """
CREATE TABLE session_leases (
  session_label TEXT PRIMARY KEY,
  holder TEXT,
  epoch INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  acquired_at INTEGER NOT NULL
);
CREATE INDEX session_leases_held ON session_leases(expires_at) WHERE holder IS NOT NULL;
ALTER TABLE queue_items ADD COLUMN claim_epoch INTEGER;
"""
"""Version 14: one run per session across processes. A session's lease names the broker that may run it
until ``expires_at``, with an ``epoch`` that grows at every new tenure; a claim made under a lease stamps
its items with that epoch (``claim_epoch``), and the writes of a run check it, so a process that lost
its lease writes nothing (``nexus.ledger._leases``, docs/scaling.md). The index serves the sweep for
leases that expired while held (their holder died). No foreign key to ``sessions``: a lease is taken
before its session's first turn, and a per-sender session may be created by that batch's accept."""

MIGRATIONS: tuple[str, ...] = (
    _V1, _V2, _V3, _V4, _V5, _BROKER, _PROMPTS, _DELIVERIES, _QUEUE_INDEXES, _AWAITED_REPLIES,
    _NO_AGENT_HISTORY_INDEX, _CLAIM_OWNER, _ROUTING, _SESSION_LEASES, QUEUE_OVERFLOW,
)  # fmt: skip
"""Migration ``i`` takes a database from ``user_version`` i to i+1. Append only; never edit a shipped one."""

SCHEMA_VERSION = len(MIGRATIONS)
