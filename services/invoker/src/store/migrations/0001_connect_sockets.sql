ALTER TABLE "invoker"."runners" ADD COLUMN "replica" text;--> statement-breakpoint
ALTER TABLE "invoker"."runners" ADD COLUMN "connection_id" text;