CREATE TABLE "agent_groups" (
	"id" text PRIMARY KEY NOT NULL,
	"merchant_id" text NOT NULL,
	"name" text NOT NULL,
	"is_default" boolean DEFAULT false NOT NULL,
	"position" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agents" (
	"id" text PRIMARY KEY NOT NULL,
	"merchant_id" text NOT NULL,
	"group_id" text,
	"username" text NOT NULL,
	"password_hash" text NOT NULL,
	"nickname" text NOT NULL,
	"avatar" text DEFAULT '' NOT NULL,
	"level" text DEFAULT 'agent' NOT NULL,
	"manual_state" text,
	"disabled" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "conversations" (
	"id" text PRIMARY KEY NOT NULL,
	"merchant_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"visitor_id" text NOT NULL,
	"timestamp" bigint NOT NULL,
	"pinned_at" bigint DEFAULT 0 NOT NULL,
	"unread_count" integer DEFAULT 0 NOT NULL,
	"bot" integer DEFAULT 0 NOT NULL,
	"account_state" text DEFAULT 'normal' NOT NULL,
	"history_only_mine" boolean DEFAULT false NOT NULL,
	"items" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"closed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "merchants" (
	"id" text PRIMARY KEY NOT NULL,
	"bid" text NOT NULL,
	"appname" text NOT NULL,
	"appkey" text NOT NULL,
	"identity_secret" text NOT NULL,
	"verified" boolean DEFAULT false NOT NULL,
	"paid" bigint DEFAULT 0 NOT NULL,
	"switches" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"image_max_bytes" bigint DEFAULT 20971520 NOT NULL,
	"file_max_bytes" bigint DEFAULT 20971520 NOT NULL,
	"video_max_bytes" bigint DEFAULT 104857600 NOT NULL,
	"voice_max_bytes" bigint DEFAULT 20971520 NOT NULL,
	"workbench_settings" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"extensions" jsonb DEFAULT '{"nav":[],"chat_actions":[],"side_iframes":[],"flags":{},"account_level_options":{}}'::jsonb NOT NULL,
	"settings_version" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "merchants_bid_unique" UNIQUE("bid"),
	CONSTRAINT "merchants_appkey_unique" UNIQUE("appkey")
);
--> statement-breakpoint
CREATE TABLE "visitor_attribute_defs" (
	"merchant_id" text NOT NULL,
	"key" text NOT NULL,
	"label" text NOT NULL,
	"type" text DEFAULT 'text' NOT NULL,
	"editable" boolean DEFAULT false NOT NULL,
	"position" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "visitor_attribute_defs_merchant_id_key_pk" PRIMARY KEY("merchant_id","key")
);
--> statement-breakpoint
CREATE TABLE "visitor_attributes" (
	"visitor_id" text NOT NULL,
	"key" text NOT NULL,
	"value" jsonb,
	CONSTRAINT "visitor_attributes_visitor_id_key_pk" PRIMARY KEY("visitor_id","key")
);
--> statement-breakpoint
CREATE TABLE "visitor_tokens" (
	"token_hash" text PRIMARY KEY NOT NULL,
	"visitor_id" text NOT NULL,
	"merchant_id" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "visitors" (
	"id" text PRIMARY KEY NOT NULL,
	"merchant_id" text NOT NULL,
	"external_user_id" text,
	"nickname" text NOT NULL,
	"avatar" text DEFAULT '' NOT NULL,
	"lang" text DEFAULT 'en' NOT NULL,
	"channel" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "visitors_channel_unique" UNIQUE("channel")
);
--> statement-breakpoint
ALTER TABLE "agent_groups" ADD CONSTRAINT "agent_groups_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agents" ADD CONSTRAINT "agents_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agents" ADD CONSTRAINT "agents_group_id_agent_groups_id_fk" FOREIGN KEY ("group_id") REFERENCES "public"."agent_groups"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_visitor_id_visitors_id_fk" FOREIGN KEY ("visitor_id") REFERENCES "public"."visitors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "visitor_attribute_defs" ADD CONSTRAINT "visitor_attribute_defs_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "visitor_attributes" ADD CONSTRAINT "visitor_attributes_visitor_id_visitors_id_fk" FOREIGN KEY ("visitor_id") REFERENCES "public"."visitors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "visitor_tokens" ADD CONSTRAINT "visitor_tokens_visitor_id_visitors_id_fk" FOREIGN KEY ("visitor_id") REFERENCES "public"."visitors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "visitor_tokens" ADD CONSTRAINT "visitor_tokens_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "visitors" ADD CONSTRAINT "visitors_merchant_id_merchants_id_fk" FOREIGN KEY ("merchant_id") REFERENCES "public"."merchants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "agent_groups_merchant_name" ON "agent_groups" USING btree ("merchant_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "agent_groups_one_default" ON "agent_groups" USING btree ("merchant_id") WHERE "agent_groups"."is_default";--> statement-breakpoint
CREATE UNIQUE INDEX "agents_username_ci" ON "agents" USING btree (lower("username"));--> statement-breakpoint
CREATE INDEX "agents_merchant" ON "agents" USING btree ("merchant_id");--> statement-breakpoint
CREATE UNIQUE INDEX "conversations_open_pair" ON "conversations" USING btree ("agent_id","visitor_id") WHERE "conversations"."closed_at" is null;--> statement-breakpoint
CREATE INDEX "conversations_agent_open" ON "conversations" USING btree ("agent_id","merchant_id") WHERE "conversations"."closed_at" is null;--> statement-breakpoint
CREATE INDEX "visitor_tokens_visitor" ON "visitor_tokens" USING btree ("visitor_id");--> statement-breakpoint
CREATE UNIQUE INDEX "visitors_merchant_external" ON "visitors" USING btree ("merchant_id","external_user_id");