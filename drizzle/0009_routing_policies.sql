ALTER TABLE "agent_groups" ADD COLUMN "routing" text DEFAULT 'LEAST_BUSY' NOT NULL;--> statement-breakpoint
ALTER TABLE "agent_groups" ADD COLUMN "routing_cursor" text;