ALTER TABLE "merchants" ADD COLUMN "registered_mobile" text;--> statement-breakpoint
ALTER TABLE "merchants" ADD CONSTRAINT "merchants_registered_mobile_unique" UNIQUE("registered_mobile");