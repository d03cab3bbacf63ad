ALTER TABLE "event_outbox" ADD COLUMN "order_key" text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE INDEX "event_outbox_key" ON "event_outbox" USING btree ("order_key","id");