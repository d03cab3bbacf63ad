ALTER TABLE "agent_groups" ADD COLUMN "business_hours" jsonb;--> statement-breakpoint
ALTER TABLE "merchants" ADD COLUMN "business_hours" jsonb;