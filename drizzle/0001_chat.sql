CREATE TABLE "attachments" (
	"id" text PRIMARY KEY NOT NULL,
	"merchant_id" text NOT NULL,
	"uploader_type" text NOT NULL,
	"uploader_id" text NOT NULL,
	"kind" text NOT NULL,
	"mime" text NOT NULL,
	"size" bigint NOT NULL,
	"name" text NOT NULL,
	"storage_key" text NOT NULL,
	"thumbnail_key" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"referenced_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "event_outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"channel" text NOT NULL,
	"event" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" text PRIMARY KEY NOT NULL,
	"conversation_id" text NOT NULL,
	"merchant_id" text NOT NULL,
	"visitor_id" text NOT NULL,
	"seq" integer NOT NULL,
	"sender_type" text NOT NULL,
	"sender_id" text DEFAULT '' NOT NULL,
	"client_msg_id" text,
	"type" text NOT NULL,
	"content" text DEFAULT '' NOT NULL,
	"attachment_id" text,
	"meta" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"recalled_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "conversations" DROP CONSTRAINT "conversations_agent_id_agents_id_fk";
--> statement-breakpoint
DROP INDEX "conversations_open_pair";--> statement-breakpoint
DROP INDEX "conversations_agent_open";--> statement-breakpoint
ALTER TABLE "conversations" ALTER COLUMN "agent_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "max_concurrent_chats" integer;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "last_assigned_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "group_id" text;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "state" text DEFAULT 'queued' NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "version" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "last_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "visitor_read_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "agent_read_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "created_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "queued_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "assigned_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "closed_by" text;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "rating_score" integer;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "rating_resolved" boolean;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "rating_comment" text;--> statement-breakpoint
ALTER TABLE "conversations" ADD COLUMN "rated_at" timestamp with time zone;--> statement-breakpoint
-- Conversations from before the chat model: closed, or active with their agent.
UPDATE "conversations" SET "state" = CASE WHEN "closed_at" IS NOT NULL THEN 'closed' WHEN "agent_id" IS NOT NULL THEN 'active' ELSE 'queued' END, "assigned_at" = CASE WHEN "agent_id" IS NOT NULL THEN now() END;--> statement-breakpoint
ALTER TABLE "merchants" ADD COLUMN "max_concurrent_chats" integer DEFAULT 5 NOT NULL;--> statement-breakpoint
ALTER TABLE "merchants" ADD COLUMN "idle_close_minutes" integer DEFAULT 30 NOT NULL;--> statement-breakpoint
ALTER TABLE "merchants" ADD COLUMN "storage_quota_bytes" bigint DEFAULT 10737418240 NOT NULL;--> statement-breakpoint
ALTER TABLE "attachments" ADD CONSTRAINT "attachments_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."conversations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_visitor_id_visitors_id_fk" FOREIGN KEY ("visitor_id") REFERENCES "public"."visitors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_attachment_id_attachments_id_fk" FOREIGN KEY ("attachment_id") REFERENCES "public"."attachments"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "attachments_merchant" ON "attachments" USING btree ("merchant_id");--> statement-breakpoint
CREATE INDEX "attachments_unreferenced" ON "attachments" USING btree ("created_at") WHERE "attachments"."referenced_at" is null;--> statement-breakpoint
CREATE INDEX "event_outbox_created" ON "event_outbox" USING btree ("created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "messages_conversation_seq" ON "messages" USING btree ("conversation_id","seq");--> statement-breakpoint
CREATE UNIQUE INDEX "messages_client_msg_id" ON "messages" USING btree ("conversation_id","sender_type","sender_id","client_msg_id");--> statement-breakpoint
CREATE INDEX "messages_visitor" ON "messages" USING btree ("visitor_id","created_at");--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_group_id_agent_groups_id_fk" FOREIGN KEY ("group_id") REFERENCES "public"."agent_groups"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "conversations_one_open" ON "conversations" USING btree ("merchant_id","visitor_id") WHERE "conversations"."state" <> 'closed';--> statement-breakpoint
CREATE INDEX "conversations_queue" ON "conversations" USING btree ("merchant_id","queued_at") WHERE "conversations"."state" = 'queued';--> statement-breakpoint
CREATE INDEX "conversations_agent_active" ON "conversations" USING btree ("agent_id") WHERE "conversations"."state" = 'active';--> statement-breakpoint
CREATE INDEX "conversations_visitor" ON "conversations" USING btree ("visitor_id","created_at");--> statement-breakpoint
ALTER TABLE "conversations" DROP COLUMN "unread_count";