ALTER TABLE "conversations" ADD COLUMN "left_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "left_reason" text;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "contact" jsonb;--> statement-breakpoint
ALTER TABLE "merchants" ADD COLUMN "contact_fields" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
CREATE INDEX "conversations_left" ON "conversations" USING btree ("merchant_id","left_at") WHERE "conversations"."state" = 'queued' and "conversations"."left_at" is not null;