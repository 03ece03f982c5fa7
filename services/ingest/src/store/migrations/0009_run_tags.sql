ALTER TABLE "ingest"."batch_events" ADD COLUMN "session" text;--> statement-breakpoint
ALTER TABLE "ingest"."batch_events" ADD COLUMN "tags" text[];--> statement-breakpoint
ALTER TABLE "ingest"."debounces" ADD COLUMN "session" text;--> statement-breakpoint
ALTER TABLE "ingest"."debounces" ADD COLUMN "tags" text[];--> statement-breakpoint
ALTER TABLE "ingest"."events" ADD COLUMN "tags" text[];--> statement-breakpoint
ALTER TABLE "ingest"."scheduled_events" ADD COLUMN "tags" text[];