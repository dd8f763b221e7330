PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE memories (
     id INTEGER PRIMARY KEY,
     namespace TEXT NOT NULL,
     scope TEXT NOT NULL,
     key TEXT,
     category TEXT,
     content TEXT NOT NULL,
     importance REAL NOT NULL,
     confidence REAL NOT NULL,
     source_session TEXT,
     source_turn TEXT,
     source_via TEXT,
     seq INTEGER,
     context TEXT NOT NULL DEFAULT '',
     occurred_at INTEGER NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     superseded_by INTEGER,
     forgotten_at INTEGER,
     forget_reason TEXT
   );
INSERT INTO memories VALUES(1,'default','user','user.dog','profile','The user''s dog is Rex',0.59999999999999997779,0.8000000000000000444,'b3fd65c5-d7ab-42f8-b294-204969979d57','b3fd65c5-d7ab-42f8-b294-204969979d57/1','extractor',1,'',1795469247964,1795469247964,1795469247964,NULL,NULL,NULL);
CREATE VIRTUAL TABLE memories_fts USING fts5(content, key, category, context, content='memories', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE misses (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, query TEXT NOT NULL, at INTEGER NOT NULL, session_id TEXT, turn_id TEXT);
INSERT INTO misses VALUES(1,'default','I live in Lisbon and my dog is Rex.',1795469247939,'b3fd65c5-d7ab-42f8-b294-204969979d57','b3fd65c5-d7ab-42f8-b294-204969979d57/1');
INSERT INTO misses VALUES(2,'default','deploy with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY to the bucket',1795469247940,'b3fd65c5-d7ab-42f8-b294-204969979d57','b3fd65c5-d7ab-42f8-b294-204969979d57/1');
CREATE TABLE extractions (turn_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, at INTEGER NOT NULL, facts INTEGER NOT NULL);
INSERT INTO extractions VALUES('b3fd65c5-d7ab-42f8-b294-204969979d57/1','default',1795469247965,1);
CREATE INDEX memories_ns_key ON memories(namespace, key) WHERE key IS NOT NULL;
CREATE INDEX memories_ns_session ON memories(namespace, source_session, seq);
CREATE INDEX memories_ns_created ON memories(namespace, created_at);
CREATE INDEX memories_dedupe ON memories(namespace, substr(content, 1, 80));
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
     INSERT INTO memories_fts(rowid, content, key, category, context) VALUES (new.id, new.content, coalesce(new.key, ''), coalesce(new.category, ''), new.context);
   END;
CREATE TRIGGER memories_retire AFTER UPDATE OF superseded_by, forgotten_at ON memories
     WHEN old.superseded_by IS NULL AND old.forgotten_at IS NULL AND (new.superseded_by IS NOT NULL OR new.forgotten_at IS NOT NULL) BEGIN
     INSERT INTO memories_fts(memories_fts, rowid, content, key, category, context) VALUES ('delete', old.id, old.content, coalesce(old.key, ''), coalesce(old.category, ''), old.context);
   END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories WHEN old.superseded_by IS NULL AND old.forgotten_at IS NULL BEGIN
     INSERT INTO memories_fts(memories_fts, rowid, content, key, category, context) VALUES ('delete', old.id, old.content, coalesce(old.key, ''), coalesce(old.category, ''), old.context);
   END;
INSERT INTO memories_fts(memories_fts) VALUES('rebuild');
COMMIT;
