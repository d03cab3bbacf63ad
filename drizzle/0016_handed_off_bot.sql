ALTER TABLE "conversations" ADD COLUMN "handed_off_bot_id" text;--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_handed_off_bot_id_bots_id_fk" FOREIGN KEY ("handed_off_bot_id") REFERENCES "public"."bots"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
-- Open conversations handed off before the column existed: the bot named by their latest hand-off message.
UPDATE "conversations" c SET "handed_off_bot_id" = (
	SELECT m."meta"->>'bot_id' FROM "messages" m
	WHERE m."conversation_id" = c."id" AND m."meta"->>'event' = 'handoff'
		AND EXISTS (SELECT 1 FROM "bots" b WHERE b."id" = m."meta"->>'bot_id')
	ORDER BY m."seq" DESC LIMIT 1
) WHERE c."bot" = 2 AND c."state" <> 'closed' AND c."handed_off_bot_id" IS NULL;
