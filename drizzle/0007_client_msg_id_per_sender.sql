-- Issue 27, row 5: one stored message per sender and client_msg_id across the visitor's
-- conversations. Rows stored twice before this index (a retry that raced a close) keep their
-- oldest copy's key; the later copies stay as messages, without the key.
UPDATE "messages" SET "client_msg_id" = NULL WHERE "id" IN (SELECT "id" FROM (SELECT "id", row_number() OVER (PARTITION BY "visitor_id", "sender_type", "sender_id", "client_msg_id" ORDER BY "created_at", "id") AS "n" FROM "messages" WHERE "client_msg_id" IS NOT NULL) AS "copies" WHERE "n" > 1);--> statement-breakpoint
DROP INDEX "messages_client_msg_id";--> statement-breakpoint
CREATE UNIQUE INDEX "messages_sender_client_msg_id" ON "messages" USING btree ("visitor_id","sender_type","sender_id","client_msg_id");
